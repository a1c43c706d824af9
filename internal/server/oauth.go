package server

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/stackbone/stackbone/internal/apierror"
)

// ResourceMetadataPath is where the OAuth 2.0 Protected Resource Metadata
// (RFC 9728) of the server is; the MCP route's own document is at this
// path followed by MCPRoute (§3.1: the resource's path after the
// well-known segment).
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

// oauthRoutes serves the protected resource metadata documents when end
// users' tokens are accepted (an issuer is configured); without one the
// server does not take OAuth tokens and advertises nothing (404).
func (s *Server) oauthRoutes() {
	s.Handle("GET "+ResourceMetadataPath, WireOpenAI, false, s.resourceMetadata(""))
	s.Handle("GET "+ResourceMetadataPath+MCPRoute, WireOpenAI, false, s.resourceMetadata(MCPRoute))
}

// resourceMetadata serves the metadata of the resource at path under the
// public URL: its identifier, the issuer as its authorization server,
// bearer tokens in the Authorization header, and the scopes to ask for
// (STACKBONE_JWT_SCOPES).
func (s *Server) resourceMetadata(path string) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.jwt == nil || s.PublicURL() == "" {
			return apierror.New(apierror.NotFound, "unknown_route",
				"This server takes no OAuth access tokens: STACKBONE_JWT_ISSUER is not set.")
		}
		doc := oauthex.ProtectedResourceMetadata{
			Resource:               s.PublicURL() + path,
			AuthorizationServers:   []string{s.jwt.Issuer()},
			BearerMethodsSupported: []string{"header"},
			ScopesSupported:        s.Config.JWT.Scopes,
			ResourceName:           "Stackbone",
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		return json.NewEncoder(w).Encode(doc)
	}
}
