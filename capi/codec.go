package main

/*
#include <stdlib.h>
#include <string.h>
#include "focus.h"
*/
import "C"

import (
	"unsafe"

	"github.com/focus-go/focus-go/backends/chat"
	"github.com/focus-go/focus-go/capi/binding"
)

// cIDs copies token ids into a C buffer the caller frees with focus_buffer_free.
func cIDs(ids []uint32, out **C.uint32_t, n *C.size_t) {
	*n = C.size_t(len(ids))
	*out = (*C.uint32_t)(cCopy(ids))
}

// cFloats copies values into a C buffer the caller frees with focus_buffer_free (NULL
// when empty).
func cFloats(values []float64) *C.double { return (*C.double)(cCopy(values)) }

// cCopy copies values into a malloc'd buffer (NULL when empty).
func cCopy[T uint32 | float64](values []T) unsafe.Pointer {
	if len(values) == 0 {
		return nil
	}
	size := C.size_t(len(values)) * C.size_t(unsafe.Sizeof(values[0]))
	buf := C.malloc(size)
	C.memcpy(buf, unsafe.Pointer(&values[0]), size)
	return buf
}

// goIDs views caller-owned token ids without copying; it must not outlive the call.
func goIDs(p *C.uint32_t, n C.size_t) []uint32 {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(p)), int(n))
}

func codecOf(h C.focus_handle) (*chat.Codec, error) {
	return handleAs[*chat.Codec](uint64(h), "chat codec")
}

//export focus_codec_load
func focus_codec_load(model *C.char, modelLen C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		codec, err := chat.Load(goString(model, modelLen))
		if err != nil {
			return err
		}
		*out = C.focus_handle(handles.put(codec))
		return nil
	})
}

//export focus_codec_info
func focus_codec_info(h C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		codec, err := codecOf(h)
		if err != nil {
			return err
		}
		cfg := codec.Config()
		return returnJSON(out, map[string]any{
			"source":         codec.Tokenizer().Source(),
			"vocab_size":     codec.Tokenizer().VocabSize(),
			"special_tokens": cfg.SpecialTokens(),
			"special_ids":    cfg.SpecialIDs(),
			"chat_template":  codec.TemplateSource(),
		})
	})
}

//export focus_codec_encode
func focus_codec_encode(h C.focus_handle, text *C.char, n C.size_t, addSpecial C.int32_t, ids **C.uint32_t, count *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		codec, err := codecOf(h)
		if err != nil {
			return err
		}
		encoded, err := codec.Tokenizer().Encode(string(goBytes(text, n)), addSpecial != 0)
		if err != nil {
			return err
		}
		cIDs(encoded, ids, count)
		return nil
	})
}

//export focus_codec_decode
func focus_codec_decode(h C.focus_handle, ids *C.uint32_t, n C.size_t, skipSpecial C.int32_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		codec, err := codecOf(h)
		if err != nil {
			return err
		}
		text, err := codec.Decode(goIDs(ids, n), skipSpecial != 0)
		if err != nil {
			return err
		}
		setBytes(out, text)
		return nil
	})
}

type wireRenderRequest = binding.RenderRequest

//export focus_codec_render
func focus_codec_render(h C.focus_handle, request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		codec, err := codecOf(h)
		if err != nil {
			return err
		}
		var req wireRenderRequest
		if err := decodeJSON(request, n, "render request", &req); err != nil {
			return err
		}
		messages, err := chat.ParseMessageObjects(req.Messages)
		if err != nil {
			return err
		}
		tools, err := chat.ParseTools(req.Tools)
		if err != nil {
			return err
		}
		kwargs := make(map[string]any, len(req.Kwargs))
		for k, v := range req.Kwargs {
			kwargs[k] = v
		}
		prompt, err := codec.EncodeJSON(messages, tools, req.AddGenerationPrompt, kwargs)
		if err != nil {
			return err
		}
		return returnJSON(out, map[string]any{"text": prompt.Text, "tokens": prompt.Tokens})
	})
}
