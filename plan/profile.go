package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vouchml/vouch/tensor"
)

// SelectProfile returns the index of the first profile whose ranges hold
// every input's shape. A plan without profiles accepts any shape (index
// -1). When no profile fits, the error names, for each profile, the first
// input dimension outside its range.
func (p *Plan) SelectProfile(inputs map[string]*tensor.Tensor) (int, error) {
	if len(p.Header.Profiles) == 0 {
		return -1, nil
	}
	var why []string
	for i, pr := range p.Header.Profiles {
		reason := fits(pr, inputs)
		if reason == "" {
			return i, nil
		}
		why = append(why, fmt.Sprintf("profile %d: %s", i, reason))
	}
	return 0, fmt.Errorf("plan: input shapes fit no optimization profile (%s)", strings.Join(why, "; "))
}

func fits(pr Profile, inputs map[string]*tensor.Tensor) string {
	names := make([]string, 0, len(pr.Inputs))
	for n := range pr.Inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		r := pr.Inputs[name]
		t, ok := inputs[name]
		if !ok {
			continue // a missing input is the executor's error to report
		}
		if len(t.Shape) != len(r.Min) {
			return fmt.Sprintf("input %q has rank %d, profile rank %d", name, len(t.Shape), len(r.Min))
		}
		for d, v := range t.Shape {
			if v < r.Min[d] || v > r.Max[d] {
				return fmt.Sprintf("input %q dimension %d is %d, outside %d..%d", name, d, v, r.Min[d], r.Max[d])
			}
		}
	}
	return ""
}
