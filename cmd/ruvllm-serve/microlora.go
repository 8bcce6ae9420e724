package main

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
