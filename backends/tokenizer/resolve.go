package tokenizer

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/focus-go/focus-go/core/status"
)

// ConfigFileName is the Hugging Face tokenizer configuration (chat template, special tokens)
// inside a model directory.
const ConfigFileName = "tokenizer_config.json"

// Resolve finds the local directory that holds a model's tokenizer.json and
// tokenizer_config.json. model is either a directory path or a Hugging Face model id
// ("Qwen/Qwen3-8B") looked up in the local hub cache (see CacheDir), where the snapshot that
// refs/main names is preferred over any other complete snapshot.
//
// Nothing is ever downloaded: a model that is not on disk is a status.NotFound error that
// lists every place that was searched, so the caller knows where to put the files.
func Resolve(model string) (string, error) {
	if model == "" {
		return "", status.Errorf(status.InvalidArgument, "tokenizer: empty model name, expected a directory or a model id such as \"Qwen/Qwen3-8B\"")
	}
	var looked []string
	if info, err := os.Stat(model); err == nil && info.IsDir() {
		if missing := missingFiles(model); len(missing) > 0 {
			return "", status.Errorf(status.NotFound, "tokenizer: directory %s has no %s", model, strings.Join(missing, " or "))
		}
		return model, nil
	}
	looked = append(looked, model+" (not a directory)")

	cache := CacheDir()
	repo := filepath.Join(cache, "models--"+strings.ReplaceAll(model, "/", "--"))
	snapshots := filepath.Join(repo, "snapshots")
	// refs/main is what `from_pretrained(model)` would load offline; prefer it so the
	// tokenizer matches the weights a server started from the same cache serves.
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err == nil {
		dir := filepath.Join(snapshots, strings.TrimSpace(string(ref)))
		if len(missingFiles(dir)) == 0 {
			return dir, nil
		}
		looked = append(looked, dir+" (refs/main)")
	}
	entries, err := os.ReadDir(snapshots)
	if err != nil {
		looked = append(looked, snapshots)
		return "", status.Errorf(status.NotFound, "tokenizer: model %q is not available locally (nothing is downloaded); looked in %s", model, strings.Join(looked, ", "))
	}
	// Any other complete snapshot, newest first, so the choice does not depend on
	// directory listing order.
	type snap struct {
		dir string
		mod int64
	}
	var found []snap
	for _, e := range entries {
		dir := filepath.Join(snapshots, e.Name())
		if !e.IsDir() || len(missingFiles(dir)) > 0 {
			continue
		}
		info, err := os.Stat(filepath.Join(dir, FileName))
		if err != nil {
			continue
		}
		found = append(found, snap{dir, info.ModTime().UnixNano()})
	}
	if len(found) == 0 {
		looked = append(looked, snapshots+"/*")
		return "", status.Errorf(status.NotFound, "tokenizer: model %q has no snapshot with %s and %s (nothing is downloaded); looked in %s", model, FileName, ConfigFileName, strings.Join(looked, ", "))
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].mod != found[j].mod {
			return found[i].mod > found[j].mod
		}
		return found[i].dir < found[j].dir
	})
	return found[0].dir, nil
}

// CacheDir is the Hugging Face hub cache: $HF_HUB_CACHE (or the legacy
// $HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, else
// ~/.cache/huggingface/hub (huggingface_hub's own order, XDG_CACHE_HOME included).
func CacheDir() string {
	for _, name := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := os.Getenv(name); d != "" {
			return d
		}
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "~"
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// missingFiles lists which of the two tokenizer files dir lacks (dangling cache symlinks
// count as missing).
func missingFiles(dir string) []string {
	var missing []string
	for _, name := range []string{FileName, ConfigFileName} {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.IsDir() {
			missing = append(missing, name)
		}
	}
	return missing
}
