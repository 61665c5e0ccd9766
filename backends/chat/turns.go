package chat

import (
	"encoding/json"

	"github.com/focus-go/focus-go/backends/parse"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/status"
)

// Turns is the whole-turn chat context (collect.Turns) for a collection whose prompt
// this codec rendered from messages and tools (a JSON array of tool schemas, or null)
// with the template keyword arguments kwargs: replies are read by the tool-call
// dialect profile names (parse.ForProfile), and the codec's chat template renders the
// tool messages. It fails when the codec has no chat template or the profile or tools
// are invalid.
func (c *Codec) Turns(profile string, messages []json.RawMessage, tools json.RawMessage, kwargs map[string]json.RawMessage) (*collect.Turns, error) {
	schemas, err := ParseTools(tools)
	if err != nil {
		return nil, err
	}
	parser, err := parse.ForProfile(profile, schemas)
	if err != nil {
		return nil, err
	}
	args := make(map[string]any, len(kwargs))
	for k, v := range kwargs {
		args[k] = v
	}
	opts, args, err := SplitOptions(args)
	if err != nil {
		return nil, err
	}
	if opts.Continue != "" || opts.MaxLength > 0 {
		return nil, status.Errorf(status.InvalidArgument, "chat: template_kwargs continue_final_message and truncation apply to one prompt, not to a collection, whose turns must extend one another exactly; remove them from the ChatCodec's template_kwargs")
	}
	tmpl, err := c.templateFor(opts.ChatTemplate)
	if err != nil {
		return nil, err
	}
	return &collect.Turns{Parser: parser, Template: turnTemplate{tmpl, args}, Messages: messages, Tools: schemas}, nil
}

// turnTemplate adapts a chat template and its keyword arguments to collect.Template.
type turnTemplate struct {
	template *Template
	kwargs   map[string]any
}

func (t turnTemplate) Render(messages, tools []json.RawMessage, addGenerationPrompt bool) (string, error) {
	return t.template.render(messages, tools, addGenerationPrompt, t.kwargs, "")
}
