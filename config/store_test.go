package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadDaemon_StoreLastValuesEvery(t *testing.T) {
	d, err := loadText(t, "appliance_id: a\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Store.LastValuesEvery.D(); got != DefaultLastValuesEvery {
		t.Errorf("default = %v, want %v", got, DefaultLastValuesEvery)
	}
	d, err = loadText(t, "store: {last_values_every: 1s}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Store.LastValuesEvery.D(); got != time.Second {
		t.Errorf("last_values_every: 1s gave %v", got)
	}
	for _, bad := range []string{"100ms", "2h"} {
		_, err := loadText(t, "store: {last_values_every: "+bad+"}\n")
		if err == nil || !strings.Contains(err.Error(), "store.last_values_every") {
			t.Errorf("last_values_every: %s: err = %v, want one naming the key", bad, err)
		}
	}
}
