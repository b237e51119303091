package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// decodeOpts says how decodeBody treats an empty body.
type decodeOpts struct {
	allowEmpty bool // an empty body leaves dst unchanged (POST .../run)
}

// decodeBody decodes the request body into dst strictly (README: REST):
// exactly one JSON value, unknown keys refused naming the key, numbers kept
// as json.Number where dst holds `any`. The body is already capped by the
// route's limit (http.MaxBytesReader); exceeding it surfaces as
// *http.MaxBytesError, which writeError answers with 413. Every other
// failure is a 400 naming the field or the position.
func decodeBody(r *http.Request, dst any, o decodeOpts) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) && o.allowEmpty {
			return nil
		}
		return decodeError(err)
	}
	// Exactly one value: anything but white space after it is refused.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return decodeError(err)
		}
		return errorf(http.StatusBadRequest, KindInvalid, "request body has data after the JSON value")
	}
	return nil
}

// decodeError turns a json decoding error into a 400 (or keeps the
// *http.MaxBytesError, which becomes a 413).
func decodeError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		pe  *time.ParseError
	)
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, KindInvalid, "request body is empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, KindInvalid, "request body is truncated JSON")
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, KindInvalid, "malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		if te.Field == "" {
			return errorf(http.StatusBadRequest, KindInvalid, "request body is a JSON %s; want %s", te.Value, jsonKind(te.Type.Kind().String()))
		}
		return errorf(http.StatusBadRequest, KindInvalid, "field %q: got a JSON %s, want %s", te.Field, te.Value, jsonKind(te.Type.String()))
	case errors.As(err, &pe):
		return errorf(http.StatusBadRequest, KindInvalid, "time %q is not RFC 3339 (2006-01-02T15:04:05Z)", pe.Value)
	}
	// encoding/json reports unknown keys as a plain error:
	// `json: unknown field "x"`; custom decoders (apitypes.TagWrite) may
	// return their own text. Both are the client's fault.
	return errorf(http.StatusBadRequest, KindInvalid, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "struct", strings.Contains(goType, "."), strings.HasPrefix(goType, "map"):
		return "an object"
	}
	return fmt.Sprintf("a %s", goType)
}
