package store

import "testing"

func TestClaimCursor_Advance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		from     string
		accounts []string // one per claimed job
		want     string
	}{
		{"NothingClaimedStays", "b", nil, "b"},
		{"OneAccount", "", []string{"a"}, "a"},
		{"LastOfOneRound", "", []string{"a", "b", "c"}, "c"},
		{"LastOfOneRoundWrapped", "b", []string{"c", "a", "b"}, "b"},
		{"LastRoundIsPartial", "", []string{"a", "a", "b", "b", "c"}, "b"},
		{"PartialRoundWrapped", "b", []string{"c", "c", "a", "a", "b"}, "a"},
		{"ShortAccountLeftOut", "", []string{"a", "b", "b", "b", "c", "c", "c"}, "c"},
		{"AfterCursorBeforeWrapped", "m", []string{"z", "a"}, "a"},
		{"CursorAccountComesLast", "m", []string{"m", "z"}, "m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &claimCursor{account: tc.from}
			c.advance(tc.from, tc.accounts)
			if got := c.get(); got != tc.want {
				t.Errorf("cursor after a claim from %q of %v = %q, want %q", tc.from, tc.accounts, got, tc.want)
			}
		})
	}
	t.Run("ConcurrentAdvanceKept", func(t *testing.T) {
		t.Parallel()
		c := &claimCursor{account: "b"} // another claim moved it from "a" to "b"
		c.advance("a", []string{"c"})
		if got := c.get(); got != "b" {
			t.Errorf("cursor = %q, want %q (the other claim's move kept)", got, "b")
		}
	})
}
