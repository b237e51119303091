package service

import "testing"

func TestUserRecord_FromWireNames(t *testing.T) {
	u, err := userRecord("eng", "platform", "", []string{"designer", "users_admin"})
	if err != nil || len(u.Permissions) != 2 {
		t.Fatalf("platform: %+v %v", u, err)
	}
	for _, c := range [][]string{{"op", "operator", "design"}, {"op", "operator", "boss"}, {"op", "partner", "view"}, {"op", "operator", ""}} {
		if _, err := userRecord(c[0], c[1], c[2], nil); err == nil {
			t.Errorf("%v accepted", c)
		}
	}
}
