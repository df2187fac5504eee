# Quick start:  make demo   (build, then train the demo net)
#               make test   (build, then run every test through ctest)
# Other targets: build, asan (an ASan+UBSan build in build-asan/), fuzz, clean.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build deps demo test asan test-asan fuzz clean

all: build

deps:
	@if ! scripts/install-deps.sh --check >/dev/null 2>&1; then \
	  if [ "$$(id -u)" -eq 0 ]; then scripts/install-deps.sh; \
	  else scripts/install-deps.sh --check; exit 1; fi; fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	bash examples/fashion_mnist/run_demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORTADO_SANITIZE=ON -DCORTADO_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)

test-asan: asan
	cd build-asan && ctest --output-on-failure -j $(JOBS)

fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORTADO_FUZZ=ON -DCORTADO_SANITIZE=ON -DCORTADO_CUDA=OFF -DCORTADO_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
