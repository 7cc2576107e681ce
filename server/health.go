package server

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// BeginDrain turns the server's readiness false — HTTP /v2/health/ready
// answers 400 and gRPC health NOT_SERVING — while it goes on serving, so
// that load balancers and Kubernetes stop routing to it before its
// listeners close. Drain follows.
func (s *Server) BeginDrain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
}

// registerGRPCExtras adds the standard gRPC health service (grpc.health.v1,
// whose status is Ready's: SERVING, or NOT_SERVING while a model warms up
// and from the start of a drain) and server reflection.
func (s *Server) registerGRPCExtras(g *grpc.Server) {
	healthpb.RegisterHealthServer(g, &healthService{s: s})
	reflection.Register(g)
}

type healthService struct {
	healthpb.UnimplementedHealthServer
	s *Server
}

func (h *healthService) status(service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	switch service {
	case "", "inference.GRPCInferenceService":
	default:
		return 0, status.Errorf(codes.NotFound, "unknown service %q", service)
	}
	if h.s.Ready() {
		return healthpb.HealthCheckResponse_SERVING, nil
	}
	return healthpb.HealthCheckResponse_NOT_SERVING, nil
}

func (h *healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, err := h.status(req.GetService())
	if err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// Watch sends the status at once and then on every change, checking every
// 500 ms, until the client goes away.
func (h *healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := h.status(req.GetService())
		if err != nil {
			st = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
		}
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-t.C:
		}
	}
}

// buildInfo is the vouch_build_info metric: always 1, labelled with the
// version, the VCS revision the binary was built from and the Go version.
func buildInfo(version string) prometheus.Collector {
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" {
				rev = kv.Value
			}
		}
	}
	if version == "" {
		version = "dev"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vouch_build_info", Help: "Always 1; the labels say which build of vouch is running.",
		ConstLabels: prometheus.Labels{"version": version, "revision": rev, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
