package critic

import (
	"context"
	"time"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/status"
)

// Server is a value server reached over HTTP (Critic.http).
type Server struct {
	http *transport.Client
}

type scoreRequest struct {
	Contexts []string `json:"contexts"`
}

type scoreResponse struct {
	Values *[]float64 `json:"values"`
}

// HTTP returns a critic that POSTs {"contexts": [...]} to url and reads
// {"values": [...]}. timeout bounds one Score call, retries included
// (0 = only the caller's context bounds it). It does not contact the server.
func HTTP(url string, timeout time.Duration) (*Server, error) {
	if timeout < 0 {
		return nil, status.Errorf(status.InvalidArgument, "critic: timeout %v must not be negative", timeout)
	}
	c, err := transport.New(transport.Config{Name: "critic", BaseURL: url, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return &Server{http: c}, nil
}

// URL is the endpoint the critic posts to (without credentials).
func (s *Server) URL() string { return s.http.BaseURL() }

// Transport is the underlying HTTP client (for its traffic counters).
func (s *Server) Transport() *transport.Client { return s.http }

// Close releases idle connections; later Score calls fail.
func (s *Server) Close() { s.http.Close() }

// Score sends every context in one request and checks the reply: exactly one
// finite value per context.
func (s *Server) Score(ctx context.Context, contexts []string) ([]float64, error) {
	if contexts == nil {
		contexts = []string{}
	}
	var values []float64
	err := s.http.Do(ctx, transport.Call{Method: "POST", Body: scoreRequest{Contexts: contexts}}, func(body []byte) error {
		var resp scoreResponse
		if err := transport.JSON.Unmarshal(body, &resp); err != nil {
			return status.Wrap(status.Backend, err, "critic: %s: response is not {\"values\": [finite numbers]} (NaN and Infinity are not JSON numbers)", s.http.BaseURL())
		}
		if resp.Values == nil {
			return status.Errorf(status.Backend, "critic: %s: response has no \"values\" list", s.http.BaseURL())
		}
		values = *resp.Values
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := collect.CheckCriticValues(values, len(contexts)); err != nil {
		return nil, status.Wrap(status.Backend, err, "critic: %s", s.http.BaseURL())
	}
	return values, nil
}
