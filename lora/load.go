package lora

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// ggufMagic starts every GGUF file.
var ggufMagic = []byte("GGUF")

// Load reads the adapter at path — a PEFT directory (adapter_config.json
// and adapter_model.safetensors) or a GGUF LoRA file — and validates it
// against the base model described by cfg and base.
func Load(path string, cfg *models.Config, base *gguf.File) (*Adapter, error) {
	a, err := read(path, cfg)
	if err != nil {
		return nil, err
	}
	if err := a.Validate(cfg, base); err != nil {
		return nil, err
	}
	return a, nil
}

// read reads the adapter at path without validating it against the base
// file.
func read(path string, cfg *models.Config) (*Adapter, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return readPEFTDir(path, cfg)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, path)
	}
	head := make([]byte, 4)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	_, err = io.ReadFull(f, head)
	f.Close()
	if err != nil || !bytes.Equal(head, ggufMagic) {
		return nil, fmt.Errorf("%w: %s is not a GGUF file (an adapter is a GGUF LoRA file or a PEFT directory)", ErrInvalid, filepath.Base(path))
	}
	return OpenGGUF(path)
}

// readPEFTDir reads the two files of a PEFT adapter directory.
func readPEFTDir(dir string, cfg *models.Config) (*Adapter, error) {
	config, err := os.ReadFile(filepath.Join(dir, PEFTConfigFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s", ErrInvalid, filepath.Base(dir), PEFTConfigFile)
	}
	if err != nil {
		return nil, err
	}
	weights, err := os.ReadFile(filepath.Join(dir, PEFTWeightsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s", ErrInvalid, filepath.Base(dir), PEFTWeightsFile)
	}
	if err != nil {
		return nil, err
	}
	return ParsePEFT(config, weights, cfg)
}
