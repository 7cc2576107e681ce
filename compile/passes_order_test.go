package compile

import (
	"strings"
	"testing"
)

// The order constraints hold on the real table (init checks it too), and
// a table that breaks one, repeats a pass or lacks one is refused.
func TestPassOrder(t *testing.T) {
	if err := checkPassOrder(pipeline(), passOrder[:]); err != nil {
		t.Fatal(err)
	}
	swapped := pipeline()
	for i, p := range swapped {
		if p.name == "precision" {
			swapped[i], swapped[i-1] = swapped[i-1], swapped[i] // after fuse-activation no more
			break
		}
	}
	if err := checkPassOrder(swapped, passOrder[:]); err == nil || !strings.Contains(err.Error(), `"fuse-activation" must run before "precision"`) {
		t.Errorf("precision before fuse-activation: %v", err)
	}
	twice := append(pipeline(), pipeline()[0])
	if err := checkPassOrder(twice, passOrder[:]); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a pass twice: %v", err)
	}
	if err := checkPassOrder(pipeline()[1:], passOrder[:]); err == nil || !strings.Contains(err.Error(), "lacks") {
		t.Errorf("a pass missing: %v", err)
	}
	required := 0
	for _, p := range pipeline() {
		if p.required {
			required++
		}
	}
	if required == 0 {
		t.Error("no pass is required")
	}
}
