"""patchspec: declarative, release-aware patches for installed vLLM and vllm-gaudi sources."""
