package models

import "math"

// gemma3 is Gemma 3 (text): Gemma 2's block with per-head query and key
// norms instead of soft-capping (a final-logit cap only when the file sets
// one), five sliding-window layers (window attention.sliding_window) to
// every global one, and another RoPE base in the sliding-window layers
// (rope.freq_base_swa, 10000). The 270M and 1B sizes have no window
// pattern key; a file without attention.sliding_window has no window at
// all. The output projection may be tied.
var gemma3 = &Architecture{
	Name: "gemma3",
	Rope: RopeNeoX,
	Tensors: concat(
		embedTensors,
		gemmaTensors,
		qkNormTensors,
	),
	Hyper: func(r *KeyReader, c *Config) {
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
		if w := r.Int("attention.sliding_window", 0); w > 0 {
			c.SlidingWindow = w
			c.SWALayers = r.LayerPattern("attention.sliding_window_pattern", c.Layers, 6)
			c.RopeBaseSWA = r.Float("rope.freq_base_swa", 10000)
			c.RopeScaleSWA = 1
		}
		c.FinalSoftCap = r.Float("final_logit_softcapping", 0)
		gemmaQueryScale(c, 62)
	},
}

func init() { Register(gemma3) }
