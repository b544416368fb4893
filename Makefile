.PHONY: run test bench sillytavern-extension
run:  ## install everything and run the product on the embedded default
	bash scripts/run.sh
test: ## install everything and run all tests (SQLite, then PostgreSQL + Redis)
	bash scripts/test.sh
sillytavern-extension: ## build var/dist/loreweave-sillytavern.zip, the SillyTavern extension a user installs
	python3 scripts/build-sillytavern-extension.py var/dist/loreweave-sillytavern.zip
