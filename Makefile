# libvkrt front end (Linux/Buildroot habits). The real build is Ninja in $(O).
O ?= build
BOARD ?= sim-lavapipe-x2
KCONFIG_PY := /usr/bin/python3
KCONFIG_ENV := PYTHONPATH=/usr/lib/python3/dist-packages KCONFIG_CONFIG=$(CURDIR)/.config srctree=$(CURDIR)
KTOOL := $(KCONFIG_PY) tools/kconfig.py --srcdir $(CURDIR) --config $(CURDIR)/.config
BOARDS := $(notdir $(wildcard boards/*))
NINJA := ninja -C $(O)

.PHONY: all help menuconfig guiconfig savedefconfig olddefconfig check-config test clean \
        distclean run image deps bench test-asan test-tsan fuzz soak $(BOARDS:%=%_defconfig)

all: $(O)/build.ninja
	@$(NINJA)

help:
	@echo 'libvkrt targets:'
	@echo '  <board>_defconfig - write .config from boards/<board>/defconfig; boards:'
	@for b in $(BOARDS); do echo "                      $$b"; done
	@echo '  menuconfig        - curses menu (starts from $(BOARD) when there is no .config)'
	@echo '  guiconfig         - Tk menu'
	@echo '  olddefconfig      - update .config to the current Kconfig with defaults'
	@echo '  savedefconfig     - write the minimal config to ./defconfig'
	@echo '  all (default)     - configure if needed, then build libvkrt.a, tools, tests in $(O)/'
	@echo '  run               - the main job: vkrt-service on the board for a few seconds'
	@echo '  test              - the whole test suite (prints "N passed, N failed, N skipped")'
	@echo '  check-config      - every board survives olddefconfig + savedefconfig unchanged'
	@echo '  image             - $(O)/image/ and the reproducible tarball'
	@echo '  test-asan, test-tsan, fuzz, soak - hardening targets'
	@echo '  deps              - install the Debian packages the build needs'
	@echo '  clean, distclean  - remove $(O)/ (and .config)'
	@echo 'Variables: O=<builddir> (default build), BOARD=<board> (default sim-lavapipe-x2)'

deps:
	./configure --install-deps --deps-only

# A fresh Debian machine gets its packages on first use (configure --install-missing).
$(O)/.deps-ok:
	@./configure --install-missing --deps-only
	@mkdir -p $(O) && touch $@

$(BOARDS:%=%_defconfig): %_defconfig: $(O)/.deps-ok
	@$(KTOOL) defconfig boards/$*/defconfig

.config: | $(O)/.deps-ok
	@echo "no .config: using board $(BOARD)"
	@$(KTOOL) defconfig boards/$(BOARD)/defconfig

menuconfig: | .config
	$(KCONFIG_ENV) $(KCONFIG_PY) -m menuconfig Kconfig

guiconfig: | .config
	@$(KCONFIG_PY) -c 'import tkinter' 2>/dev/null || \
	  { echo "guiconfig needs Tk for /usr/bin/python3: apt-get install python3-tk"; exit 1; }
	$(KCONFIG_ENV) $(KCONFIG_PY) -m guiconfig Kconfig

olddefconfig: | .config
	@$(KTOOL) olddefconfig

savedefconfig: | .config
	@$(KTOOL) savedefconfig defconfig

$(O)/build.ninja: | .config $(O)/.deps-ok
	./configure --builddir $(O)

check-config: $(O)/.deps-ok
	@tests/config/check-config.sh

test: all
	@tests/run --builddir $(O)

run: all
	@tools/run-service.sh $(O)

image: all
	@tools/make-image.sh $(O)

bench: all
	$(O)/bin/vkrt-bench all

test-asan:
	$(MAKE) O=build-asan SANITIZE=asan sanitized-test
test-tsan:
	$(MAKE) O=build-tsan SANITIZE=tsan sanitized-test

.PHONY: sanitized-test
sanitized-test: | .config
	./configure --cc gcc --builddir $(O) --sanitize $(SANITIZE) --opt=-O1
	$(NINJA)
	tests/run --builddir $(O) --sanitizer $(SANITIZE)

fuzz: | .config
	tests/fuzz/run.sh

soak: all
	tests/soak/run.sh $(O)

clean:
	rm -rf $(O)

distclean: clean
	rm -rf build-* .config .config.old defconfig
