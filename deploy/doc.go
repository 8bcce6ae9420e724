// Package deploy holds no code: it is the files that run ruvllm-serve as
// several replicas (the HAProxy config that docker-compose.yml and
// test-local.sh share, Prometheus's scrape config, the Grafana dashboard,
// the Kubernetes manifests of an InferencePool). Its tests check that those
// files agree with each other and name series the server exports.
package deploy
