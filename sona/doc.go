// Package sona is the server's self-learning part: the router behind
// "model": "auto". It describes each request by features of its text
// (hashed n-grams, the instruction's head and tail), its length, max tokens
// and user; learns online, as a contextual bandit, how well and at what cost
// each arm (a served model, adapter or backend) answers such requests, from
// their outcomes and users' ratings; and picks the arm with the best expected
// quality − W × expected cost, exploring only among arms that could be best.
// Past trajectories (features, choice, outcome, feedback) are kept in a
// ReasoningBank whose k nearest neighbours inform each decision, and in a
// log file, so that a restart does not forget. Routing traces (RouterBench's
// shape) replay through the same router to measure it.
package sona
