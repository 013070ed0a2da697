// an orchestration on the original API
