// Package chat renders a model's chat template (the Jinja2 source in a GGUF's
// tokenizer.chat_template) into a prompt string, byte for byte as Hugging Face
// transformers' apply_chat_template does with Python Jinja2. It runs the
// template on gonja, with the Python-flavoured filters, tests, methods and
// globals that real templates rely on added around it.
package chat
