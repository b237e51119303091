package flow

import (
	"strings"
	"testing"
	"time"
)

func TestCron_Next(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct{ expr, from, want string }{
		{"* * * * *", "2026-03-10 10:15", "2026-03-10 10:16"},
		{"*/5 * * * *", "2026-03-10 10:15", "2026-03-10 10:20"},
		{"*/5 * * * *", "2026-03-10 10:59", "2026-03-10 11:00"},
		{"0 6 * * *", "2026-03-10 10:15", "2026-03-11 06:00"},
		{"30 2 1 * *", "2026-03-10 10:15", "2026-04-01 02:30"},
		{"0 0 * * mon-fri", "2026-03-13 10:00", "2026-03-16 00:00"}, // Friday → Monday
		{"0 12 * * 0", "2026-03-10 10:00", "2026-03-15 12:00"},
		{"0 12 * * 7", "2026-03-10 10:00", "2026-03-15 12:00"}, // 7 is Sunday too
		{"15,45 8-9 * * *", "2026-03-10 08:20", "2026-03-10 08:45"},
		{"15,45 8-9 * * *", "2026-03-10 09:50", "2026-03-11 08:15"},
		{"0 0 1 jan *", "2026-03-10 10:00", "2027-01-01 00:00"},
		{"0 0 13 * mon", "2026-03-10 10:00", "2026-03-13 00:00"}, // day of month OR day of week: the 13th (a Friday)
		{"0 0 13 * mon", "2026-03-13 10:00", "2026-03-16 00:00"}, // ... then Monday the 16th
		{"0 0 29 2 *", "2026-03-10 10:00", "2028-02-29 00:00"},
		{"@hourly", "2026-03-10 10:15", "2026-03-10 11:00"},
		{"@daily", "2026-12-31 23:59", "2027-01-01 00:00"},
		{"10-20/5 * * * *", "2026-03-10 10:12", "2026-03-10 10:15"},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr)
		if err != nil {
			t.Errorf("%q: %v", tt.expr, err)
			continue
		}
		if got := c.Next(at(tt.from)); !got.Equal(at(tt.want)) {
			t.Errorf("%q after %s: %s, want %s", tt.expr, tt.from, got.Format("2006-01-02 15:04 Mon"), tt.want)
		}
	}
	// ParseCron refuses February 30th; Next still answers never for it.
	c := &Cron{minute: 1, hour: 1, dom: 1 << 30, month: 1 << 2, dow: 0xff, dowStar: true, text: "0 0 30 2 *"}
	if got := c.Next(at("2026-03-10 10:00")); !got.IsZero() {
		t.Errorf("February 30th: %s, want never", got)
	}
}

func TestCron_Errors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"* * * *", "want 5 fields"},
		{"60 * * * *", `minute field "60": "60": want 0-59`},
		{"* 24 * * *", "hour field"},
		{"* * 0 * *", "day of month field"},
		{"* * * 13 *", "month field"},
		{"* * * * 8", "day of week field"},
		{"*/0 * * * *", `step "0"`},
		{"5-1 * * * *", "runs backwards"},
		{"* * * foo *", "or a name (jan, feb"},
		{"0 0 30 2 *", `day of month "30" never falls in month "2"`},
		{"0 0 31 apr,jun,sep,nov *", "never falls in month"},
		{"0 0 30-31 feb *", "never falls in month"},
	}
	for _, ok := range []string{"0 0 29 2 *", "0 0 31 2 mon", "0 0 31 * *", "0 0 30 1-2 *"} {
		if _, err := ParseCron(ok); err != nil {
			t.Errorf("%q: %v, want it accepted (it matches some day)", ok, err)
		}
	}
	for _, tt := range tests {
		_, err := ParseCron(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error containing %q", tt.expr, err, tt.want)
		}
	}
}
