package backends

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

type embedResult struct {
	vec []float32
	err error
}

// Embed returns the mean of the final hidden states of tokens, normalised to
// unit length. It runs through the scheduler like a prompt, so it waits in
// the same queue.
func (e *Engine) Embed(ctx context.Context, tokens []tokenizer.ID) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens to embed", ErrInvalidRequest)
	}
	if len(tokens) > e.opt.MaxLen {
		return nil, fmt.Errorf("%w: %d tokens to embed, more than the context of %d", ErrContextLength, len(tokens), e.opt.MaxLen)
	}
	if err := e.checkTokens(tokens); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &request{
		ctx:        ctx,
		prompt:     slices.Clone(tokens),
		n:          1,
		unfinished: 1,
		embed:      make(chan embedResult, 1),
	}
	if err := e.enqueue(req); err != nil {
		return nil, err
	}
	res := <-req.embed
	return res.vec, res.err
}

// embedding is the mean of the pooled hidden states, L2-normalised.
func (s *slot) embedding() []float32 {
	var sum float64
	for _, v := range s.pool {
		sum += v * v
	}
	// The mean's length is the sum's length over the count: normalising
	// the sum gives the same unit vector.
	scale := 0.0
	if sum > 0 {
		scale = 1 / math.Sqrt(sum)
	}
	vec := make([]float32, len(s.pool))
	for j, v := range s.pool {
		vec[j] = float32(v * scale)
	}
	return vec
}
