.PHONY: run test bench
run:  ## install everything and run the product on the embedded default
	bash scripts/run.sh
test: ## install everything and run all tests (SQLite, then PostgreSQL + Redis)
	bash scripts/test.sh
