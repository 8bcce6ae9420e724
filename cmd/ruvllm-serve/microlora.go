package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ruvllm/ruvllm/backends/gorgonia"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/session"
)

// microFlags configure the MicroLoRA adapters trained from feedback.
type microFlags struct {
	on        bool
	rank      int
	targets   string
	cpu       float64
	objective string
	margin    float64
	// max bounds the MicroLoRAs feedback creates, per model.
	max int
}

// microSink hands a model's feedback to its MicroLoRA trainer: a pair or a
// correction trains pairs (Margin by default; a correction of an empty
// completion SFT), a rating KTO.
type microSink struct {
	model string
	m     *gorgonia.MicroLoRA
	pairs gorgonia.Objective
}

var _ session.AdapterTrainer = (*microSink)(nil)

func (s *microSink) Feedback(_ context.Context, fb *session.Feedback) error {
	if fb.Model != s.model || fb.Adapter == "" {
		return nil
	}
	ev := gorgonia.MicroEvent{Adapter: fb.Adapter, Objective: s.pairs,
		Example: gorgonia.Example{Prompt: fb.Prompt, Chosen: fb.Chosen, Rejected: fb.Rejected, Rating: fb.Rating}}
	switch {
	case fb.Kind == session.FeedbackRating:
		ev.Objective = gorgonia.KTO
	case fb.Kind == session.FeedbackCorrection && len(fb.Rejected) == 0:
		ev.Objective = gorgonia.SFT
	}
	err := s.m.Submit(ev)
	switch {
	case err == nil, errors.Is(err, lora.ErrBadName):
		return err
	case errors.Is(err, gorgonia.ErrNotMicro), errors.Is(err, lora.ErrExists):
		return fmt.Errorf("%w: %w", session.ErrFeedbackConflict, err)
	case errors.Is(err, gorgonia.ErrTooMany):
		return fmt.Errorf("%w: %w", session.ErrFeedbackLimit, err)
	case errors.Is(err, gorgonia.ErrBusy):
		return fmt.Errorf("%w: %w", session.ErrFeedbackBusy, err)
	case errors.Is(err, gorgonia.ErrBadExample):
		return fmt.Errorf("%w: %w", session.ErrFeedbackInvalid, err)
	}
	return err
}

func (s *microSink) Training(model, adapter string) (lora.Training, bool) {
	if model != s.model {
		return lora.Training{}, false
	}
	return s.m.Stats(adapter)
}

// startMicroLoRA starts the trainer of a model's MicroLoRAs, published into
// its adapter registry, and makes it the model's feedback sink.
func startMicroLoRA(mf *microFlags, s *servedModel) {
	o := gorgonia.MicroOptions{CPUShare: mf.cpu, Train: gorgonia.TrainOptions{Rank: mf.rank, Targets: strings.Split(mf.targets, ","), Margin: mf.margin},
		MaxAdapters: mf.max}
	s.micro = gorgonia.NewMicroLoRA(s.model.File, s.model.Config, s.api.Adapters, o)
	s.api.Feedback = append(s.api.Feedback, &microSink{model: s.api.ID, m: s.micro, pairs: gorgonia.Objective(mf.objective)})
	s.log.Info().Str("model", s.api.ID).Int("rank", mf.rank).Str("targets", mf.targets).Str("objective", mf.objective).Float64("cpu_share", mf.cpu).Int("max", mf.max).Msg("MicroLoRA adapters train from POST /v1/feedback")
}
