package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/tensor"
)

// serveCase loads a case's plan into a real server on loopback (warm-up
// included) and sends its request as OIP JSON. It returns nil for a 200
// answer, else an error holding the status and the server's message.
func serveCase(c Case, planBytes []byte) (status int, err error) {
	p, err := plan.Decode(planBytes)
	if err != nil {
		return 0, err
	}
	r, err := server.NewPlanRunner(p, "sha256:"+plan.Digest(planBytes), c.Name, server.PlanOptions{Name: "m"})
	if err != nil {
		return 0, err
	}
	s := server.New(server.Options{Version: "hostile", RequestTimeout: perCase / 2})
	if err := s.AddModel(r); err != nil {
		return 0, err // a model that fails its warm-up is not served
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	type input struct {
		Name     string `json:"name"`
		Shape    []int  `json:"shape"`
		Datatype string `json:"datatype"`
		Data     any    `json:"data"`
	}
	var req struct {
		Inputs []input `json:"inputs"`
	}
	for _, v := range p.Graph.Inputs {
		x := c.Inputs[v.Name]
		dt := map[tensor.DType]string{tensor.Float32: "FP32", tensor.Int64: "INT64"}[x.DType]
		shape := x.Shape
		if shape == nil {
			shape = []int{}
		}
		req.Inputs = append(req.Inputs, input{Name: v.Name, Shape: shape, Datatype: dt, Data: x.Data})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	cl := &http.Client{Timeout: perCase}
	resp, err := cl.Post(hs.URL+"/v2/models/m/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, fmt.Errorf("server: %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
}
