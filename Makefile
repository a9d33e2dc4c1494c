# libvkrt front end (Linux/Buildroot habits). The real build is Ninja in $(O).
# `make O=dir ...` keeps that folder's own configuration in dir/.config (savedefconfig writes
# dir/defconfig), so several configured builds live side by side; without O= the
# configuration is ./.config, the build folder build/ and savedefconfig writes build/defconfig.
ifeq ($(origin O),command line)
O_GIVEN := 1
endif
O ?= build
BOARD ?= sim-lavapipe-x2
# savedefconfig writes into the build folder either way (never an untracked file in the tree).
DEFCONFIG_FILE ?= $(abspath $(O))/defconfig
ifdef O_GIVEN
CONFIG_FILE ?= $(abspath $(O))/.config
else
CONFIG_FILE ?= $(CURDIR)/.config
endif
KCONFIG_PY := /usr/bin/python3
KCONFIG_ENV := PYTHONPATH=/usr/lib/python3/dist-packages KCONFIG_CONFIG=$(CONFIG_FILE) srctree=$(CURDIR)
KTOOL := $(KCONFIG_PY) scripts/kconfig.py --srcdir $(CURDIR) --config $(CONFIG_FILE)
BOARDS := $(notdir $(patsubst %/,%,$(wildcard boards/*/)))
NINJA := ninja -C $(O)
# KERNELS_FROM=<build folder>: take the SPIR-V kernels built there (configure --kernels-from)
CONFIGURE := ./configure --builddir $(O) --config $(CONFIG_FILE) $(if $(KERNELS_FROM),--kernels-from $(KERNELS_FROM))

.PHONY: all help menuconfig guiconfig savedefconfig olddefconfig check-config test test-matrix install clean \
        distclean run image deps bench test-asan test-tsan fuzz soak $(BOARDS:%=%_defconfig)

all: $(O)/build.ninja
	@grep -qxF 'config = $(CONFIG_FILE)' $(O)/build.ninja || $(CONFIGURE)
	@$(NINJA)

help:
	@echo 'libvkrt targets:'
	@echo '  <board>_defconfig - write the configuration from boards/<board>/defconfig; boards:'
	@for b in $(BOARDS); do echo "                      $$b"; done
	@echo '  <name>.config     - merge boards/<name>.config into the configuration:'
	@for f in $(FRAGMENTS); do echo "                      $$f"; done
	@echo '                      e.g. make O=build-h200 nvidia-h200-x1_defconfig lab.config'
	@echo '  menuconfig        - curses menu (starts from $(BOARD) when there is no configuration)'
	@echo '  guiconfig         - Tk menu'
	@echo '  olddefconfig      - update the configuration to the current Kconfig with defaults'
	@echo '  savedefconfig     - write the minimal configuration to $(O)/defconfig'
	@echo '  all (default)     - configure if needed, then build libvkrt.a, tools, tests in $(O)/'
	@echo '  run               - the main job: vkrt-service on the board for a few seconds'
	@echo '  test              - the test suite (prints "N passed, N failed, N skipped");'
	@echo '                      T=<substring>: only the programs and scripts named so,'
	@echo '                      e.g. make test T=test_ops, make test T=tests/config/prune'
	@echo '  test-matrix       - every configuration: allyes, allno, 50 seeded randconfigs,'
	@echo '                      every kernel compiled out in turn'
	@echo '  check-config      - every board survives olddefconfig + savedefconfig unchanged'
	@echo '  install           - the library, headers, vkrt.pc, tools and docs into'
	@echo '                      $$(DESTDIR)$$(PREFIX) (PREFIX=/usr/local)'
	@echo '  image             - $(O)/image/ and the reproducible tarball'
	@echo '  test-asan, test-tsan, fuzz, soak - hardening targets'
	@echo '  deps              - install the Debian packages the build needs'
	@echo '  clean, distclean  - remove the build outputs (distclean: the configuration too)'
	@echo 'Variables: O=<builddir>: build there, with its own configuration <builddir>/.config'
	@echo '             (without O=: ./.config and build/); BOARD=<board> (default sim-lavapipe-x2)'
	@echo '           KERNELS_FROM=<builddir>: take the SPIR-V kernels built there'
	@echo '           T=<substring>: make test runs only the tests named so'
	@echo 'Configuration now: $(CONFIG_FILE); build folder: $(O)/'

deps:
	./configure --install-deps --deps-only

# A fresh Debian machine gets its packages on first use (configure --install-missing).
$(O)/.deps-ok:
	@./configure --install-missing --deps-only
	@mkdir -p $(O) && touch $@

$(BOARDS:%=%_defconfig): %_defconfig: $(O)/.deps-ok
	@$(KTOOL) defconfig boards/$*/defconfig

# Without O= a missing ./.config comes from $(BOARD), as it always did. A folder named with O=
# is configured on purpose: say how, unless BOARD= was given too.
$(CONFIG_FILE): | $(O)/.deps-ok
ifeq ($(O_GIVEN)$(origin BOARD),1file)
	@echo "$(O)/.config does not exist: configure this build folder first, e.g." >&2
	@echo "  make O=$(O) <board>_defconfig   (boards: $(BOARDS))" >&2
	@echo "  make O=$(O) menuconfig          (starts from $(BOARD))" >&2
	@exit 1
else
	@echo "no $(CONFIG_FILE): using board $(BOARD)"
	@$(KTOOL) defconfig boards/$(BOARD)/defconfig
endif

# The menus start from $(BOARD) when the folder has no configuration yet.
.PHONY: config-or-board
config-or-board: | $(O)/.deps-ok
	@[ -f $(CONFIG_FILE) ] || { echo "no $(CONFIG_FILE): starting from board $(BOARD)"; \
	  $(KTOOL) defconfig boards/$(BOARD)/defconfig; }

menuconfig: config-or-board
	$(KCONFIG_ENV) $(KCONFIG_PY) -m menuconfig Kconfig

guiconfig: config-or-board
	@$(KCONFIG_PY) -c 'import tkinter' 2>/dev/null || \
	  { echo "guiconfig needs Tk for /usr/bin/python3: apt-get install python3-tk"; exit 1; }
	$(KCONFIG_ENV) $(KCONFIG_PY) -m guiconfig Kconfig

olddefconfig: | $(CONFIG_FILE)
	@$(KTOOL) olddefconfig

savedefconfig: | $(CONFIG_FILE)
	@mkdir -p $(dir $(DEFCONFIG_FILE))
	@$(KTOOL) savedefconfig $(DEFCONFIG_FILE)
	@echo "wrote $(DEFCONFIG_FILE) (a new board: copy it to boards/<name>/defconfig)"

# Configuration fragments, boards/<name>.config, merged into the configuration in use (Linux's
# `make <name>.config`): `make O=dir nvidia-h200-x1_defconfig lab.config` is that appliance
# with the lab, for benches and tests. Goals naming a configuration run one after the other.
FRAGMENTS := $(notdir $(wildcard boards/*.config))
.PHONY: $(FRAGMENTS)
$(FRAGMENTS): %.config: | $(CONFIG_FILE)
	@$(KTOOL) merge boards/$@
ifneq ($(filter %.config %_defconfig,$(MAKECMDGOALS)),)
.NOTPARALLEL:
endif

# A board name that is not a folder under boards/.
%_defconfig:
	@echo "no board '$*': boards/$*/defconfig does not exist. Boards:" >&2
	@for b in $(BOARDS); do echo "  make $(if $(O_GIVEN),O=$(O) )$${b}_defconfig" >&2; done
	@exit 1

# configure records --builddir and --config, so ninja's regenerate rule re-reads this
# folder's configuration when it changes.
$(O)/build.ninja: | $(CONFIG_FILE) $(O)/.deps-ok
	$(CONFIGURE)

# Every board survives olddefconfig + savedefconfig unchanged, and the configuration in use
# (when there is one) loads without warnings or values that did not stick.
check-config: $(O)/.deps-ok
	@tests/config/check-config.sh
	@if [ -f $(CONFIG_FILE) ]; then $(KTOOL) check && echo "$(CONFIG_FILE): valid"; fi

# T=<substring>: only the test programs and scripts whose path contains it (tests/run --filter).
test: all
	@tests/run --builddir $(O) $(if $(T),--filter '$(T)')

# The whole configuration matrix: allyesconfig, allnoconfig and 50 seeded randconfigs, and
# every kernel compiled out in turn (make test: 3 seeds, 5 kernels); the SPIR-V kernels
# from $(O).
test-matrix: all
	@VKRT_BUILDDIR=$(O) VKRT_RANDCONFIG_SEEDS=$${VKRT_RANDCONFIG_SEEDS:-50} tests/config/matrix.sh
	@VKRT_BUILDDIR=$(O) VKRT_KERNEL_SUBSETS=$${VKRT_KERNEL_SUBSETS:-all} tests/config/kernel-subsets.sh

run: all
	@tools/run-service.sh $(O)

image: all
	@tools/make-image.sh $(O)

# $(DESTDIR)$(PREFIX)/{lib,include/vkrt,lib/pkgconfig,bin,share/vkrt}: tools/install.sh.
PREFIX ?= /usr/local
install: all
	@tools/install.sh $(O) "$(DESTDIR)$(PREFIX)"

bench: all
	$(O)/bin/vkrt-bench all

# Sanitized builds sit beside $(O) (build-asan, build-tsan) with $(O)'s configuration.
test-asan: | $(CONFIG_FILE)
	$(MAKE) O=$(O)-asan CONFIG_FILE=$(CONFIG_FILE) SANITIZE=asan sanitized-test
test-tsan: | $(CONFIG_FILE)
	$(MAKE) O=$(O)-tsan CONFIG_FILE=$(CONFIG_FILE) SANITIZE=tsan sanitized-test

.PHONY: sanitized-test
sanitized-test: | $(CONFIG_FILE)
	./configure --cc gcc --builddir $(O) --config $(CONFIG_FILE) --sanitize $(SANITIZE) --opt=-O1
	$(NINJA)
	tests/run --builddir $(O) --sanitizer $(SANITIZE)

fuzz: | $(CONFIG_FILE)
	FUZZ_CONFIG=$(CONFIG_FILE) tests/fuzz/run.sh

soak: all
	tests/soak/run.sh $(O)

# clean keeps a folder's own configuration (dir/.config, dir/defconfig); distclean removes it.
clean:
ifdef O_GIVEN
	@[ ! -d $(O) ] || find $(O) -mindepth 1 -maxdepth 1 ! -name .config ! -name .config.old \
	  ! -name defconfig -exec rm -rf {} +
else
	rm -rf $(O)
endif

distclean:
ifdef O_GIVEN
	rm -rf $(O)
else
	rm -rf build build-* .config .config.old
endif
