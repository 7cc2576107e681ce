package server

import (
	"crypto/x509"
	"slices"
)

// credentialsFor authenticates a caller: through Options.Credentials when
// set; otherwise every caller is "anonymous" with Options.AnonymousRoles
// (default infer only: without credentials nobody may read the audit trail
// or change the model repository unless the operator says so).
func (s *Server) credentialsFor(authz string, peer []*x509.Certificate) authResult {
	if s.opt.Credentials != nil {
		return s.opt.Credentials.authenticate(authz, peer)
	}
	roles := s.opt.AnonymousRoles
	if len(roles) == 0 {
		roles = []string{RoleInfer}
	}
	return authResult{p: &Principal{Name: "anonymous", Roles: slices.Clone(roles)}}
}
