package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// decodeOpts says how decodeBody treats an empty body.
type decodeOpts struct {
	allowEmpty bool // an empty body leaves dst unchanged (POST .../run)
}

// KindUnsupportedMedia is the problem kind of a JSON route's body sent
// without Content-Type: application/json (415).
const KindUnsupportedMedia = "unsupported_media_type"

// decodeBody decodes the request body into dst strictly (docs/api.md,
// "Request bodies"): a non-empty body must be sent as
// Content-Type: application/json (else 415); then decodeJSON: exactly one
// JSON value, UTF-8 only, no duplicate keys, keys matched exactly, unknown
// keys refused naming the key, numbers kept as json.Number where dst
// holds `any`. The body is already capped by the route's limit
// (http.MaxBytesReader); exceeding it surfaces as *http.MaxBytesError,
// which writeError answers with 413. Every other failure is a 400 naming
// the field or the position. It is the one decoder of every JSON route.
func decodeBody(r *http.Request, dst any, o decodeOpts) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if o.allowEmpty {
			return nil
		}
		return decodeError(io.EOF)
	}
	if err := requireJSONType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	return decodeJSON(body, dst)
}

// requireJSONType refuses (415) a body whose Content-Type is not
// application/json; a charset parameter, if any, must be utf-8 (RFC 8259
// §8.1).
func requireJSONType(ct string) error {
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case ct == "":
		return errorf(http.StatusUnsupportedMediaType, KindUnsupportedMedia,
			"request body without a Content-Type: send JSON with Content-Type: application/json")
	case err != nil || mt != "application/json":
		return errorf(http.StatusUnsupportedMediaType, KindUnsupportedMedia,
			"Content-Type %q is not accepted here: send JSON with Content-Type: application/json", ct)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return errorf(http.StatusUnsupportedMediaType, KindUnsupportedMedia,
			"charset %q is not accepted: JSON is UTF-8 (Content-Type: application/json)", cs)
	}
	return nil
}

// decodeError turns a json decoding error into a 400 (or keeps the
// *http.MaxBytesError, which becomes a 413, and an *httpError as it is).
func decodeError(err error) error {
	var (
		he  *httpError
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		pe  *time.ParseError
	)
	switch {
	case errors.As(err, &he):
		return he
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
