package server

import (
	"context"
	"time"

	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/backends/vllm"
	"github.com/focus-go/focus-go/core/fleet"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// Config is one Go-native policy's servers.
type Config struct {
	// Backend is the server kind: sglang.Name or vllm.Name.
	Backend string
	// URLs are the base URLs of the policy's replicas (servers or routers of the same
	// model), one client each; at least one.
	URLs []string
	// Model is the model (vLLM: the name requests carry unless ServedModel is set).
	Model       string
	ServedModel string
	// APIKey, when set, is sent as a bearer token; Headers with every request.
	APIKey  string
	Headers map[string]string
	// Timeout bounds one request, retries included (0: only the caller's context).
	Timeout time.Duration
	// MaxConcurrency caps the requests in flight over every replica together (the
	// fleet's limit) and each client's own; 0: the servers' capacities decide, and each
	// client gets fleet.ClientSlots so that the fleet, not the transport, holds requests.
	MaxConcurrency int
	// Capacity is each replica's capacity until its server reports one (0:
	// fleet.DefaultCapacity).
	Capacity int
	// Routing is fleet.Affinity ("" too) or fleet.RoundRobin.
	Routing fleet.Routing
	// MaxRetries is how many times a request that failed in a retryable way is retried.
	MaxRetries int
	// AllowWeightChange accepts servers whose weight version changes during the run
	// (fleet.Config.AllowWeightChange).
	AllowWeightChange bool
	// VocabSize is the tokenizer's vocabulary size: answers with ids at or above it are
	// malformed (fleet.Config.VocabSize); 0: not checked.
	VocabSize int
}

// Policy is an opened Go-native policy: the fleet over its replicas, and the clients it
// owns.
type Policy struct {
	*fleet.Fleet
	clients []client
}

// client is what both token backends' clients offer.
type client interface {
	Generate(ctx context.Context, req generate.Request) (*generate.Result, error)
	Close()
}

// Open builds cfg's clients, one per URL, and the fleet over them. It contacts no server
// (see fleet.Fleet.StartupCheck). An unknown Backend, a malformed URL or an invalid fleet
// setting is a status.InvalidArgument error; on error nothing stays open.
func Open(cfg Config) (*Policy, error) {
	if cfg.Backend != sglang.Name && cfg.Backend != vllm.Name {
		return nil, status.Errorf(status.InvalidArgument, "policy config: unknown backend %q, expected %s or %s", cfg.Backend, sglang.Name, vllm.Name)
	}
	p := &Policy{}
	replicas := make([]fleet.Replica, 0, len(cfg.URLs))
	for _, url := range cfg.URLs {
		r, c, err := open(cfg, url)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.clients = append(p.clients, c)
		replicas = append(replicas, r)
	}
	f, err := fleet.New(fleet.Config{Replicas: replicas, Limit: cfg.MaxConcurrency, Routing: cfg.Routing,
		AllowWeightChange: cfg.AllowWeightChange, VocabSize: cfg.VocabSize})
	if err != nil {
		p.Close()
		return nil, err
	}
	p.Fleet = f
	return p, nil
}

// open builds one replica's client and its startup check.
func open(cfg Config, url string) (fleet.Replica, client, error) {
	slots := cfg.MaxConcurrency
	if slots == 0 {
		slots = fleet.ClientSlots
	}
	retry := transport.RetryPolicy{MaxRetries: cfg.MaxRetries}
	r := fleet.Replica{Name: url, Capacity: cfg.Capacity}
	switch cfg.Backend {
	case sglang.Name:
		c, err := sglang.New(sglang.Config{BaseURL: url, APIKey: cfg.APIKey, Headers: cfg.Headers,
			Timeout: cfg.Timeout, MaxConcurrency: slots, Retry: retry})
		if err != nil {
			return r, nil, err
		}
		r.Policy = c
		r.Check = func(ctx context.Context) (fleet.Checked, error) {
			info, err := c.StartupCheck(ctx)
			return fleet.Checked{Info: info, Capacity: info.MaxRunningRequests, Model: info.ModelPath, Tokenizer: info.TokenizerPath,
				WeightVersion: info.WeightVersion}, err
		}
		return r, c, nil
	default: // vllm.Name
		c, err := vllm.New(vllm.Config{BaseURL: url, Model: cfg.Model, ServedModel: cfg.ServedModel,
			APIKey: cfg.APIKey, Headers: cfg.Headers, Timeout: cfg.Timeout, MaxConcurrency: slots, Retry: retry})
		if err != nil {
			return r, nil, err
		}
		r.Policy = c
		r.Check = func(ctx context.Context) (fleet.Checked, error) {
			info, err := c.StartupCheck(ctx)
			model := info.Root // the model behind the served name
			if model == "" {
				model = info.ServedModel
			}
			return fleet.Checked{Info: info, Model: model}, err // vLLM does not report max_num_seqs
		}
		return r, c, nil
	}
}

// Close closes the policy's clients. It always returns nil (the handle table's
// io.Closer).
func (p *Policy) Close() error {
	if p.Fleet != nil {
		p.Fleet.Close() // an Admit waiting now returns
	}
	for _, c := range p.clients {
		c.Close()
	}
	return nil
}
