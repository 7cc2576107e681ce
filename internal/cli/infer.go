package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/replay"
	"github.com/vouchml/vouch/tensor"
)

// InferOptions are the settings of `vouch infer`.
type InferOptions struct {
	Model     string
	Version   string
	Inputs    []string // NAME=FILE
	URL       string
	Token     string
	TokenFile string
	JSON      bool // send JSON tensors instead of the binary extension
	RequestID string
	Explain   bool // ask for every row's reasons
}

func runInfer(ctx context.Context, m *Main, args []string) error {
	var o InferOptions
	fs := m.newFlagSet("infer", "infer MODEL --input NAME=FILE ... [--url URL] [--version V] [--token-file FILE]", `
Sends one inference request to a vouch server (or any Open Inference
Protocol v2 server) and prints the outputs, the trace id and, when the
server keeps an audit log, the record's log index and leaf hash. For a
classifier it prints every row's decision and, when the model is explained
(tree ensembles, linear models, or KernelSHAP over the bundle's background),
the principal reasons for each: the features that moved the score most,
with their values and contributions (the same reasons the audit record
holds). --explain=false asks for outputs only.

Inputs are ONNX TensorProto (.pb) or NumPy (.npy) files. Tensors travel in
the binary tensor extension unless --json is given.

Example:
  vouch infer breast_cancer_mlp --url http://127.0.0.1:8080 \
      --input features=../shared/models/breast_cancer_mlp/test_data_set_0/input_0.pb`)
	var inputs multiFlag
	fs.Var(&inputs, "input", "an input as NAME=FILE (.pb or .npy); repeat for each input")
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "server base URL")
	fs.StringVar(&o.Version, "version", "", "model version (default: the server's latest)")
	fs.StringVar(&o.Token, "token", "", "bearer token (prefer --token-file)")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token")
	fs.BoolVar(&o.JSON, "json", false, "send tensors as JSON instead of binary")
	fs.StringVar(&o.RequestID, "id", "", "request id to send (echoed by the server)")
	fs.BoolVar(&o.Explain, "explain", true, "ask the server for every row's reasons (parameters.explain)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one MODEL argument, got %d", ErrUsage, len(pos))
	}
	if len(inputs) == 0 {
		return fmt.Errorf("%w: no --input given", ErrUsage)
	}
	o.Model, o.Inputs = pos[0], inputs
	return m.infer(ctx, o)
}

func (m *Main) infer(ctx context.Context, o InferOptions) error {
	feeds := map[string]*tensor.Tensor{}
	for _, s := range o.Inputs {
		name, file, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%w: --input %q: want NAME=FILE", ErrUsage, s)
		}
		t, err := ReadTensorFile(file)
		if err != nil {
			return fmt.Errorf("input %q: %w", name, err)
		}
		feeds[name] = t
	}
	token, err := readToken(o.Token, o.TokenFile)
	if err != nil {
		return err
	}
	body, hdr, err := encodeInferRequest(feeds, o.RequestID, !o.JSON, o.Explain)
	if err != nil {
		return err
	}
	resp, err := postInfer(ctx, http.DefaultClient, inferURL(o.URL, o.Model, o.Version), body, hdr, token)
	if err != nil {
		return err
	}
	outs, params, raw, err := decodeInferResponse(resp)
	trace := resp.Header.Get("Vouch-Trace-Id")
	if err != nil {
		return fmt.Errorf("%w (trace id %s)", err, trace)
	}
	names := make([]string, 0, len(outs))
	for n := range outs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(m.Stdout, describe(n, outs[n]))
	}
	if l, ok := params["output_label"]; ok {
		fmt.Fprintf(m.Stdout, "label     %v (confidence %v)\n", l, params["confidence"])
	}
	printDecisions(m.Stdout, params)
	fmt.Fprintf(m.Stdout, "trace id  %s\n", trace)
	if idx := resp.Header.Get("Vouch-Log-Index"); idx != "" {
		fmt.Fprintf(m.Stdout, "audit     log index %s, leaf hash %s\n", idx, resp.Header.Get("Vouch-Leaf-Hash"))
	}
	if id, ok := raw["id"]; ok {
		fmt.Fprintf(m.Stdout, "id        %v\n", id)
	}
	return nil
}

func readToken(tok, file string) (string, error) {
	if file == "" {
		return tok, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func inferURL(base, model, version string) string {
	u := strings.TrimRight(base, "/") + "/v2/models/" + url.PathEscape(model)
	if version != "" {
		u += "/versions/" + url.PathEscape(version)
	}
	return u + "/infer"
}

var oipNames = map[tensor.DType]string{
	tensor.Bool: "BOOL", tensor.Uint8: "UINT8", tensor.Uint16: "UINT16", tensor.Uint32: "UINT32", tensor.Uint64: "UINT64",
	tensor.Int8: "INT8", tensor.Int16: "INT16", tensor.Int32: "INT32", tensor.Int64: "INT64", tensor.Float16: "FP16",
	tensor.Float32: "FP32", tensor.Float64: "FP64", tensor.String: "BYTES", tensor.BFloat16: "BF16",
}

// encodeInferRequest builds an OIP v2 request body: JSON, or a JSON header
// followed by binary tensor data (and binary outputs asked for).
func encodeInferRequest(feeds map[string]*tensor.Tensor, id string, bin, explain bool) ([]byte, map[string]string, error) {
	names := make([]string, 0, len(feeds))
	for n := range feeds {
		names = append(names, n)
	}
	sort.Strings(names)
	var inputs []map[string]any
	var data []byte
	for _, n := range names {
		t := feeds[n]
		dt, ok := oipNames[t.DType]
		if !ok {
			return nil, nil, fmt.Errorf("input %q: %v has no protocol datatype", n, t.DType)
		}
		in := map[string]any{"name": n, "datatype": dt, "shape": append([]int{}, t.Shape...)}
		if bin {
			var raw []byte
			if s, ok := t.Data.([]string); ok {
				for _, e := range s {
					raw = binary.LittleEndian.AppendUint32(raw, uint32(len(e)))
					raw = append(raw, e...)
				}
			} else {
				raw = tensor.RawBytes(t)
			}
			in["parameters"] = map[string]any{"binary_data_size": len(raw)}
			data = append(data, raw...)
		} else if s, ok := t.Data.([]string); ok {
			in["data"] = s
		} else {
			f, _ := t.Float64s()
			in["data"] = f
		}
		inputs = append(inputs, in)
	}
	req := map[string]any{"inputs": inputs}
	if id != "" {
		req["id"] = id
	}
	params := map[string]any{}
	if bin {
		params["binary_data_output"] = true
	}
	if explain {
		params["explain"] = true
	}
	if len(params) > 0 {
		req["parameters"] = params
	}
	js, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	if bin {
		hdr = map[string]string{"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": strconv.Itoa(len(js))}
		js = append(js, data...)
	}
	return js, hdr, nil
}

func postInfer(ctx context.Context, c *http.Client, u string, body []byte, hdr map[string]string, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.Do(req)
}

// decodeInferResponse reads an OIP v2 response (JSON or binary) into
// tensors; a non-200 answer becomes an error carrying the server's message.
func decodeInferResponse(resp *http.Response) (map[string]*tensor.Tensor, map[string]any, map[string]any, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, nil, err
	}
	js, bin := body, []byte(nil)
	if v := resp.Header.Get("Inference-Header-Content-Length"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > len(body) {
			return nil, nil, nil, fmt.Errorf("server sent a bad Inference-Header-Content-Length %q", v)
		}
		js, bin = body[:n], body[n:]
	}
	if resp.StatusCode != 200 {
		var e struct{ Error string }
		if json.Unmarshal(js, &e) == nil && e.Error != "" {
			return nil, nil, nil, fmt.Errorf("server answered %s: %s", resp.Status, e.Error)
		}
		return nil, nil, nil, fmt.Errorf("server answered %s", resp.Status)
	}
	var r struct {
		Outputs []struct {
			Name       string          `json:"name"`
			Datatype   string          `json:"datatype"`
			Shape      []int           `json:"shape"`
			Parameters map[string]any  `json:"parameters"`
			Data       json.RawMessage `json:"data"`
		} `json:"outputs"`
		Parameters map[string]any `json:"parameters"`
	}
	if err := json.Unmarshal(js, &r); err != nil {
		return nil, nil, nil, fmt.Errorf("bad response: %w", err)
	}
	var raw map[string]any
	json.Unmarshal(js, &raw)
	outs := map[string]*tensor.Tensor{}
	for _, o := range r.Outputs {
		var dt tensor.DType
		for k, v := range oipNames {
			if v == o.Datatype {
				dt = k
			}
		}
		if dt == tensor.Undefined {
			return nil, nil, nil, fmt.Errorf("output %q: unknown datatype %q", o.Name, o.Datatype)
		}
		if size, ok := o.Parameters["binary_data_size"].(float64); ok {
			n := int(size)
			if n < 0 || n > len(bin) {
				return nil, nil, nil, fmt.Errorf("output %q: binary_data_size %d exceeds the data", o.Name, n)
			}
			t, err := tensor.FromRaw(dt, o.Shape, bin[:n])
			if err != nil {
				return nil, nil, nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
			bin = bin[n:]
			outs[o.Name] = t
			continue
		}
		var vals []any
		if err := json.Unmarshal(o.Data, &vals); err != nil {
			return nil, nil, nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		if dt == tensor.String {
			s := make([]string, len(vals))
			for i, v := range vals {
				s[i], _ = v.(string)
			}
			outs[o.Name] = &tensor.Tensor{DType: dt, Shape: o.Shape, Data: s}
			continue
		}
		f := make([]float64, len(vals))
		for i, v := range vals {
			switch x := v.(type) {
			case float64:
				f[i] = x
			case bool:
				if x {
					f[i] = 1
				}
			case string: // non-finite floats
				f[i] = map[string]float64{"NaN": math.NaN(), "Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}[x]
			}
		}
		outs[o.Name] = tensor.FromFloat64s(dt, o.Shape, f)
	}
	return outs, r.Parameters, raw, nil
}

// printDecisions prints a response's decisions and reasons (the
// "decisions" and "explanation" parameters), row by row.
func printDecisions(w io.Writer, params map[string]any) {
	b, err := json.Marshal(map[string]any{"decisions": params["decisions"], "explanation": params["explanation"]})
	if err != nil {
		return
	}
	var p struct {
		Decisions []struct {
			Label      string   `json:"label"`
			Confidence *float64 `json:"confidence"`
		} `json:"decisions"`
		Explanation *struct {
			Method   string `json:"method"`
			Estimate bool   `json:"estimate"`
			Score    string `json:"score"`
			Rows     []struct {
				Target  int `json:"target"`
				Reasons []struct {
					Feature      string   `json:"feature"`
					Value        *float64 `json:"value"`
					Contribution float64  `json:"contribution"`
				} `json:"reasons"`
			} `json:"rows"`
		} `json:"explanation"`
	}
	if json.Unmarshal(b, &p) != nil {
		return
	}
	rows := len(p.Decisions)
	if x := p.Explanation; x != nil {
		rows = max(rows, len(x.Rows))
	}
	for i := range rows {
		line := fmt.Sprintf("row %d", i)
		if i < len(p.Decisions) {
			d := p.Decisions[i]
			line += ": " + d.Label
			if d.Confidence != nil {
				line += fmt.Sprintf(" (confidence %s)", strconv.FormatFloat(*d.Confidence, 'g', -1, 64))
			}
		}
		fmt.Fprintf(w, "decision  %s\n", line)
		x := p.Explanation
		if x == nil || i >= len(x.Rows) {
			continue
		}
		how := x.Method
		if x.Score != "" {
			how += " of the " + x.Score
		}
		if x.Estimate {
			how += ", an estimate"
		}
		fmt.Fprintf(w, "reasons   (%s; target %d)\n", how, x.Rows[i].Target)
		for k, r := range x.Rows[i].Reasons {
			re := audit.Reason{Feature: r.Feature, Value: math.NaN(), Contribution: r.Contribution}
			if r.Value != nil {
				re.Value = *r.Value
			}
			fmt.Fprintf(w, "          %d. %s\n", k+1, replay.ReasonText(re))
		}
	}
}
