// Package server opens a Go-native token policy (SGLangPolicy, VLLMPolicy): from a
// Config naming the server kind and its replicas' URLs, Open builds one HTTP client per
// replica (backends/sglang or backends/vllm, with the policy's key, headers, timeout,
// retries and per-client slots), gives each replica its startup check, and assembles the
// core/fleet that schedules and routes the policy's requests over them. Open is the one
// place that decides how a policy's servers become a fleet; the C ABI's focus_policy_open
// only decodes a Config, calls Open and keeps the Policy behind a handle.
//
// A Policy is safe for concurrent use by any number of collections (it is a
// *fleet.Fleet). It owns its clients and their connections: Close closes them; a request
// still in flight then fails. Open contacts no server; StartupCheck does.
package server
