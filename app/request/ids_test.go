package request

import (
	"strings"
	"testing"
)

func TestIsID(t *testing.T) {
	// ulid.Make().String()'s, the smallest and the largest ULIDs.
	for _, id := range []string{"01M8XWEGNG6VST1FWVCNT3TK1E", "01JDQ8Z7F0A2B4C6D8E0G2H4J6", "00000000000000000000000000", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
		if !IsID(id) {
			t.Errorf("IsID(%q) = false for a ULID", id)
		}
	}
	for _, s := range []string{"", "é", "01JDQ8Z7F0A2B4C6D8E0G2H4é", "01JDQ8Z7F0A2B4C6D8E0G2H4J", "01JDQ8Z7F0A2B4C6D8E0G2H4J6X",
		"81JDQ8Z7F0A2B4C6D8E0G2H4J6", "01JDQ8Z7F0A2B4C6D8E0G2H4JI", "01jdq8z7f0a2b4c6d8e0g2h4j6", "01JDQ8Z7F0A2B4C6D8E0G2H4J\x00",
		"01JDQ8Z7F0A2B4C6D8E0G2H4J\n", strings.Repeat("A", 300), "evt_01JDQ8Z7F0A2B4C6D8E0G2H4J6"} {
		if IsID(s) {
			t.Errorf("IsID(%q) = true", s)
		}
	}
}
