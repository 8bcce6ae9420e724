package api

// The shapes the tests decode responses into that api/openai does not
// export.

// byteList is s as the list of byte values OpenAI's "bytes" fields hold.
func byteList(s string) []int {
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	return b
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingList struct {
	Object string         `json:"object"`
	Data   []embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  embeddingUsage `json:"usage"`
}
