package server

import (
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

// TestDrainTurnsReadinessFalseFirst: after BeginDrain, and before any
// listener closes, HTTP readiness is false and gRPC health NOT_SERVING,
// while liveness and inference endpoints still answer.
func TestDrainTurnsReadinessFalseFirst(t *testing.T) {
	s := New(Options{Version: "1.2.3"})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := s.NewGRPCServer()
	go g.Serve(l)
	defer g.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	check := func(want healthpb.HealthCheckResponse_ServingStatus, code int) {
		t.Helper()
		r, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || r.Status != want {
			t.Errorf("gRPC health: %v %v, want %v", r, err, want)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v2/health/ready", nil))
		if rec.Code != code {
			t.Errorf("/v2/health/ready: %d, want %d", rec.Code, code)
		}
	}
	check(healthpb.HealthCheckResponse_SERVING, 200)
	if _, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "nope"}); err == nil {
		t.Error("an unknown service was reported")
	}
	s.BeginDrain()
	check(healthpb.HealthCheckResponse_NOT_SERVING, 400)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v2/health/live", nil))
	if rec.Code != 200 {
		t.Errorf("liveness %d while draining", rec.Code)
	}

	// Reflection lists the inference and health services.
	st, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sv := range resp.GetListServicesResponse().GetService() {
		names = append(names, sv.Name)
	}
	all := strings.Join(names, " ")
	if !strings.Contains(all, "inference.GRPCInferenceService") || !strings.Contains(all, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %v", names)
	}

	// vouch_build_info is 1 with the version.
	mfs, err := s.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "vouch_build_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "version" && lp.GetValue() == "1.2.3" && m.GetGauge().GetValue() == 1 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Error("no vouch_build_info{version=\"1.2.3\"} 1")
	}
}
