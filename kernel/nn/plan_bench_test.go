package nn_test

import (
	"testing"

	"github.com/vouchml/vouch/bench"
	"github.com/vouchml/vouch/compile"
)

// BenchmarkPlan is one inference of a compiled plan (as `vouch bench`
// runs it: fusions, tactics, Into forms); run with -cpu 1 and
// -cpuprofile to see where a model's time goes.
func BenchmarkPlan(b *testing.B) {
	for _, name := range []string{"resnet18", "mobilenet_v2", "tiny_bert"} {
		b.Run(name, func(b *testing.B) {
			m, err := bench.Load(models+"/"+name+"/model.onnx", bench.Shape{Batch: 1}, 1, compile.DefaultOptions())
			if err != nil {
				b.Skip(err)
			}
			e, err := bench.NewVouch(m)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if err := e.Run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := e.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
