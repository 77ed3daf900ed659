"""The LLM endpoint: an OpenAI-compatible client with budget, retries and a response cache, and the prompts."""
