//go:build !linux

package exepages

// Release does nothing outside Linux: it returns 0 and no error.
func Release() (int64, error) { return 0, nil }
