package api

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// contractRow is one route item of the contract's route table (testdata/routes.md).
type contractRow struct {
	methods []string // empty: any method
	path    string   // without /api/v1, parameters as {}
	isPre   bool     // "/apikeys...": every path under it
	need    string
	byMeth  map[string]string // "vars:read / vars:write": GET → first, others → second
}

var paramRE = regexp.MustCompile(`\{[^}]*\}`)

func normPath(p string) string { return paramRE.ReplaceAllString(p, "{}") }

// loadContract parses testdata/routes.md, a copy of the table "Routes and
// what they need" of the contract (testdata/routes.md).
func loadContract(t *testing.T) []contractRow {
	t.Helper()
	b, err := os.ReadFile("testdata/routes.md")
	if err != nil {
		t.Fatal(err)
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var rows []contractRow
	for line := range strings.SplitSeq(string(b), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) != 2 || cells[0] == "route" {
			continue
		}
		needCell := cells[1]
		need, byMeth := needCell, map[string]string(nil)
		items := tick.FindAllStringSubmatch(cells[0], -1)
		l, r, alt := strings.Cut(needCell, " / ")
		// "nothing / a session" beside `POST /auth/login`, `POST
		// /auth/logout` pairs needs with items in order; "vars:read /
		// vars:write" splits reads (GET) from writes.
		positional := alt && len(items) == 2 && !strings.Contains(cells[0], "GET")
		if alt && !positional {
			byMeth = map[string]string{"GET": firstWord(l), "*": firstWord(r)}
		}
		need = firstWord(need)
		for i, m := range items {
			item := m[1]
			if positional {
				need = firstWord([]string{l, r}[i])
			}
			var row contractRow
			if meth, p, ok := strings.Cut(item, " "); ok && !strings.HasPrefix(item, "/") {
				row.methods = strings.Split(meth, "/")
				item = p
			}
			row.isPre = strings.HasSuffix(item, "...")
			row.path = normPath(strings.TrimSuffix(item, "..."))
			row.need, row.byMeth = need, byMeth
			rows = append(rows, row)
		}
	}
	if len(rows) < 30 {
		t.Fatalf("parsed only %d route items from testdata/routes.md", len(rows))
	}
	return rows
}

func firstWord(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "a session") {
		return "a session"
	}
	if i := strings.IndexAny(s, " ("); i >= 0 {
		s = s[:i]
	}
	return s
}

// contractNeed returns what the contract (testdata/routes.md) says method path needs: an exact
// item first, else the longest prefix item.
func contractNeed(rows []contractRow, method, path string) (string, bool) {
	path = normPath(path)
	best, bestLen := "", -1
	for _, r := range rows {
		if len(r.methods) > 0 && !slices.Contains(r.methods, method) {
			continue
		}
		need := r.need
		if r.byMeth != nil {
			if n, ok := r.byMeth[method]; ok {
				need = n
			} else {
				need = r.byMeth["*"]
			}
		}
		switch {
		case !r.isPre && r.path == path:
			return need, true
		case r.isPre && strings.HasPrefix(path, r.path) && len(r.path) > bestLen:
			best, bestLen = need, len(r.path)
		}
	}
	return best, bestLen >= 0
}

func TestRoutes_Need_MatchesDesign(t *testing.T) {
	rows := loadContract(t)
	for _, rt := range routes {
		t.Run(rt.pattern(), func(t *testing.T) {
			path, ok := strings.CutPrefix(rt.path, prefix)
			if !ok {
				t.Fatalf("route %s is not under %s", rt.pattern(), prefix)
			}
			want, ok := contractNeed(rows, rt.method, path)
			if !ok {
				t.Fatalf("route %s is not in the contract's route table (testdata/routes.md)", rt.pattern())
			}
			if got := rt.need.String(); got != want {
				t.Errorf("route %s needs %q, the contract says %q", rt.pattern(), got, want)
			}
		})
	}
}

// TestRoutes_Table_HasIssueRoutes checks that every route of the contract
// for this issue is in the table, exactly once.
func TestRoutes_Table_HasIssueRoutes(t *testing.T) {
	want := []string{
		"GET /api/v1/health",
		"GET /api/v1/tags", "POST /api/v1/tags/read", "POST /api/v1/tags/write",
		"PUT /api/v1/scripts/{module}", "POST /api/v1/scripts/{module}/{entry}/run",
		"POST /api/v1/scripts/lint", "GET /api/v1/scripts",
		"POST /api/v1/apikeys", "GET /api/v1/apikeys", "DELETE /api/v1/apikeys/{id}",
		"GET /api/v1/devices",
	}
	seen := map[string]int{}
	for _, rt := range routes {
		seen[rt.pattern()]++
		if rt.handle == nil {
			t.Errorf("route %s has no handler", rt.pattern())
		}
	}
	for _, p := range want {
		if seen[p] != 1 {
			t.Errorf("route %s appears %d times in the table, want 1", p, seen[p])
		}
	}
	for p, n := range seen {
		if n > 1 {
			t.Errorf("route %s appears %d times", p, n)
		}
	}
}

// TestRoutes_ContractParser_KnownRows guards the parser itself: rows whose
// need is known from the contract by reading it.
func TestRoutes_ContractParser_KnownRows(t *testing.T) {
	rows := loadContract(t)
	tests := []struct{ method, path, want string }{
		{"GET", "/health", "nothing"},
		{"POST", "/tags/write", "tag:write"},
		{"GET", "/vars/{key}", "vars:read"},
		{"PUT", "/vars/{key}", "vars:write"},
		{"DELETE", "/apikeys/{id}", "users_admin"},
		{"POST", "/sandbox/packages", "sandbox_admin"},
		{"PUT", "/scripts/{m}", "designer"},
		{"POST", "/provision", "firmware"},
		{"POST", "/auth/login", "nothing"},
		{"POST", "/auth/logout", "a session"},
		{"GET", "/ws", "tag:read"},
		{"POST", "/users/{n}/disable", "users_admin"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			got, ok := contractNeed(rows, tt.method, tt.path)
			if !ok || got != tt.want {
				t.Errorf("contractNeed(%s %s) = %q, %v; want %q", tt.method, tt.path, got, ok, tt.want)
			}
		})
	}
}
