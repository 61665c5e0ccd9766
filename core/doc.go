// Package core holds no code: it names the engine's layer of the module and its test
// (layers_test.go) checks that every import points down.
//
// The layers, top to bottom (docs/architecture.md has the full map):
//
//	capi/      the C ABI (package main): decode, call one Go API, encode
//	sim/       the simulated inference server (a server, not a client)
//	backends/  implementations of core's interfaces (policy transports, tokenizer, chat
//	           codecs, tool-call dialects, critic servers)
//	core/      the engine: its vocabulary (core/generate, core/action), tree, search,
//	           collect, fleet, prepare, export, bridge, mathenv, rules, status, strictjson
//
// capi and sim may import backends and core; backends imports core (and other backends);
// core imports nothing of the module outside core/.
package core
