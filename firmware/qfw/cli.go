package qfw

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// This file is what `qubiqctl firmware keygen|sign` run (the CLI wires a
// flag set to each; the key never travels to an appliance).

// KeygenFile makes a signing key named name, writes its private part to
// privPath (mode 0600; an existing file is never overwritten) and the
// trusted-keys line to privPath + ".pub", and returns that line.
func KeygenFile(name, privPath string) ([]byte, error) {
	priv, pub, err := Keygen(name, nil)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(privPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("firmware: %s exists; not overwriting a signing key", privPath)
	}
	if err != nil {
		return nil, fmt.Errorf("firmware: keygen: %w", err)
	}
	_, werr := f.Write(priv)
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		os.Remove(privPath)
		return nil, fmt.Errorf("firmware: keygen: %w", err)
	}
	if err := os.WriteFile(privPath+".pub", pub, 0o644); err != nil {
		return nil, fmt.Errorf("firmware: keygen: %w", err)
	}
	return pub, nil
}

// SignFile signs the bundle at in with the key at keyPath and writes the
// result to out (default: in itself, replaced atomically), after checking
// every file's hash; it returns the manifest.
func SignFile(in, out, keyPath string) (*Manifest, error) {
	key, err := LoadSigningKey(keyPath)
	if err != nil {
		return nil, err
	}
	if out == "" {
		out = in
	}
	src, err := os.Open(in)
	if err != nil {
		return nil, fmt.Errorf("firmware: sign: %w", err)
	}
	defer src.Close()
	var buf bytes.Buffer
	m, err := Resign(src, &buf, key)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".signing")
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("firmware: sign: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("firmware: sign: %w", err)
	}
	return m, nil
}
