package sqldb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/internal/yamlnode"
)

// Drivers of a connection.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// LocalName is the name of the embedded SQLite connection that always
// exists (docs/project.md, Project file: "`local` (SQLite in data_dir) always
// exists").
const LocalName = "local"

// nameRe is the shape of connection, named query and parameter names.
var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// Connection is one entry of the project's connections: a name, a driver
// and its secret DSN (for postgres, a libpq URL or key=value string; for
// sqlite, a file path inside the data directory).
type Connection struct {
	Name   string
	Driver string
	DSN    Secret
}

// ConnectionConfig is a connection as written in the project file:
// {name, driver: postgres, dsn_file: FILE} (the file holds the DSN; a
// relative path is relative to the project file) or {name, driver: sqlite,
// path: FILE} (relative to the data directory). Line is the entry's line.
type ConnectionConfig struct {
	Name    string `yaml:"name"`
	Driver  string `yaml:"driver"`
	DSNFile string `yaml:"dsn_file"`
	Path    string `yaml:"path"`
	Line    int    `yaml:"-"`
}

// ParseConnections strictly decodes the project's connections section
// (file names the project file, for messages and relative dsn_file
// paths). Every bad entry is reported, naming the file, line and
// connection.
func ParseConnections(file string, nodes []yaml.Node) ([]ConnectionConfig, error) {
	var out []ConnectionConfig
	var errs []error
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		var c ConnectionConfig
		if err := yamlnode.DecodeStrict(n, &c); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: connection: %w", file, n.Line, err))
			continue
		}
		c.Line = n.Line
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s:%d: connection %q: %s", file, n.Line, c.Name, fmt.Sprintf(format, args...)))
		}
		switch {
		case !nameRe.MatchString(c.Name):
			bad("name must be letters, digits, _ . - (at most 64, starting with a letter or _)")
			continue
		case c.Name == LocalName:
			bad("%q is the built-in SQLite connection and cannot be redefined", LocalName)
			continue
		case seen[c.Name]:
			bad("defined twice")
			continue
		}
		seen[c.Name] = true
		switch c.Driver {
		case DriverPostgres:
			if c.DSNFile == "" || c.Path != "" {
				bad("driver postgres needs dsn_file (and no path)")
				continue
			}
			if !filepath.IsAbs(c.DSNFile) && file != "" {
				c.DSNFile = filepath.Join(filepath.Dir(file), c.DSNFile)
			}
		case DriverSQLite:
			if c.Path == "" || c.DSNFile != "" {
				bad("driver sqlite needs path (a file in the data directory; no dsn_file)")
				continue
			}
			if filepath.IsAbs(c.Path) || slices.Contains(strings.Split(filepath.ToSlash(c.Path), "/"), "..") {
				bad("path %q must be relative to the data directory, without ..", c.Path)
				continue
			}
		default:
			bad("unknown driver %q (want postgres or sqlite)", c.Driver)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// Connection reads the DSN of c (its dsn_file) and returns the connection
// to register. The error names the connection and the file, never the
// DSN.
func (c ConnectionConfig) Connection() (Connection, error) {
	switch c.Driver {
	case DriverSQLite:
		return Connection{Name: c.Name, Driver: c.Driver, DSN: NewSecret(c.Path)}, nil
	}
	b, err := os.ReadFile(c.DSNFile)
	if err != nil {
		return Connection{}, fmt.Errorf("connection %q: dsn_file: %w", c.Name, err)
	}
	dsn := strings.TrimSpace(string(b))
	if dsn == "" {
		return Connection{}, fmt.Errorf("connection %q: dsn_file %s is empty", c.Name, c.DSNFile)
	}
	return Connection{Name: c.Name, Driver: c.Driver, DSN: NewSecret(dsn)}, nil
}

// ParamType is the declared type of a named query parameter.
type ParamType string

// Parameter types of named queries ("params: {id: int}").
const (
	ParamInt       ParamType = "int"
	ParamFloat     ParamType = "float"
	ParamString    ParamType = "string"
	ParamBool      ParamType = "bool"
	ParamBytes     ParamType = "bytes"
	ParamTimestamp ParamType = "timestamp"
)

var paramTypes = map[string]ParamType{
	"int": ParamInt, "integer": ParamInt, "float": ParamFloat, "double": ParamFloat,
	"string": ParamString, "text": ParamString, "str": ParamString, "bool": ParamBool, "boolean": ParamBool,
	"bytes": ParamBytes, "timestamp": ParamTimestamp, "datetime": ParamTimestamp,
}

// NamedQuery is a stored query (project named_queries): its name, its
// default connection, its SQL with :name placeholders, and the type of each
// parameter. Every placeholder has a declared type and every declared
// parameter is used.
type NamedQuery struct {
	Name     string
	Database string
	SQL      string
	Params   map[string]ParamType
	Line     int

	order []string // placeholder names, in first-use order
}

type namedQueryYAML struct {
	Name     string            `yaml:"name"`
	Database string            `yaml:"database"`
	SQL      string            `yaml:"sql"`
	Params   map[string]string `yaml:"params"`
}

// ParseNamedQueries strictly decodes the project's named_queries section.
// Every bad entry is reported (file, line, query): unknown keys, unknown
// parameter types, placeholders without a type and types without a
// placeholder. database defaults to local; whether it names a connection
// is checked when the query runs (connections may change).
func ParseNamedQueries(file string, nodes []yaml.Node) ([]NamedQuery, error) {
	var out []NamedQuery
	var errs []error
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		var y namedQueryYAML
		if err := yamlnode.DecodeStrict(n, &y); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: named query: %w", file, n.Line, err))
			continue
		}
		q, err := NewNamedQuery(y.Name, y.Database, y.SQL, y.Params)
		if err == nil && seen[q.Name] {
			err = errors.New("defined twice")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: named query %q: %w", file, n.Line, y.Name, err))
			continue
		}
		seen[q.Name] = true
		q.Line = n.Line
		out = append(out, q)
	}
	return out, errors.Join(errs...)
}

// NewNamedQuery checks and builds a named query (see NamedQuery).
func NewNamedQuery(name, database, sql string, params map[string]string) (NamedQuery, error) {
	if !nameRe.MatchString(name) {
		return NamedQuery{}, fmt.Errorf("name %q: want letters, digits, _ . - (at most 64)", name)
	}
	if database == "" {
		database = LocalName
	}
	if strings.TrimSpace(sql) == "" {
		return NamedQuery{}, errors.New("empty sql")
	}
	q := NamedQuery{Name: name, Database: database, SQL: sql, Params: map[string]ParamType{}}
	var errs []error
	for p, t := range params {
		pt, ok := paramTypes[strings.ToLower(t)]
		if !ok {
			errs = append(errs, fmt.Errorf("parameter %q: unknown type %q (want int, float, string, bool, bytes or timestamp)", p, t))
			continue
		}
		q.Params[p] = pt
	}
	_, used := rewritePlaceholders(sql, func(int) string { return "?" })
	q.order = used
	for _, u := range used {
		if _, ok := params[u]; !ok {
			errs = append(errs, fmt.Errorf("placeholder :%s has no type in params", u))
		}
	}
	for p := range params {
		if !slices.Contains(used, p) {
			errs = append(errs, fmt.Errorf("parameter %q is not used in the sql (write :%s)", p, p))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return q, errors.Join(errs...)
}

// rewritePlaceholders replaces each :name placeholder of sql with
// ph(index), index being 1-based by first use (a repeated name reuses its
// index), and returns the new SQL and the names in index order. Text in
// '...' strings, "..." identifiers, $tag$...$tag$ bodies, -- and /* */
// comments, and PostgreSQL's :: casts are left alone.
func rewritePlaceholders(sql string, ph func(int) string) (string, []string) {
	var b strings.Builder
	var names []string
	index := map[string]int{}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (!first && c >= '0' && c <= '9')
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(sql) {
				if sql[j] == c {
					if j+1 < len(sql) && sql[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(sql))
			b.WriteString(sql[i:j])
			i = j
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			b.WriteString(sql[i : i+j])
			i += j
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j := strings.Index(sql[i+2:], "*/")
			end := len(sql)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(sql[i:end])
			i = end
		case c == '$' && i+1 < len(sql) && (sql[i+1] == '$' || isIdent(sql[i+1], true)):
			// Dollar quoting: $tag$ ... $tag$ (a $1 parameter is not one).
			k := i + 1
			for k < len(sql) && isIdent(sql[k], k == i+1) {
				k++
			}
			if k < len(sql) && sql[k] == '$' {
				tag := sql[i : k+1]
				end := strings.Index(sql[k+1:], tag)
				stop := len(sql)
				if end >= 0 {
					stop = k + 1 + end + len(tag)
				}
				b.WriteString(sql[i:stop])
				i = stop
				continue
			}
			b.WriteByte(c)
			i++
		case c == ':' && i+1 < len(sql) && sql[i+1] == ':':
			b.WriteString("::")
			i += 2
		case c == ':' && i+1 < len(sql) && isIdent(sql[i+1], true) && (i == 0 || !isIdent(sql[i-1], false)):
			j := i + 1
			for j < len(sql) && isIdent(sql[j], false) {
				j++
			}
			name := sql[i+1 : j]
			n, ok := index[name]
			if !ok {
				names = append(names, name)
				n = len(names)
				index[name] = n
			}
			b.WriteString(ph(n))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), names
}
