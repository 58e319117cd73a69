# openEuler RPM targets, included by the top Makefile. See docs/packaging.md.
#
#   make dist      Source0 (git archive of HEAD) + Source1 (vendored crates) in target/rpm/SOURCES
#   make rpm       rpmbuild -ba openeuler.spec: target/rpm/RPMS/<arch>/*.rpm, target/rpm/SRPMS/*.rpm
#   make rpm-test  installs the rpm tools if needed, make rpm, then packaging/rpm-test.sh: dnf install
#                  into an empty root, rpm -V, C and CMake consumers over the loopback, the installed
#                  conformance harness, migrations (dlopen of both names), rpmlint
#
# DIST_TREE=worktree packs the tracked files as they are in the working tree instead of HEAD.
# RPMBUILD_OPTS passes options to rpmbuild (e.g. --without check).

RPM_TOPDIR := $(TARGET_DIR)/rpm

.PHONY: dist rpm rpm-test rpm-clean

dist:
	./packaging/dist.sh $(RPM_TOPDIR)/SOURCES

rpm: dist
	rm -rf $(RPM_TOPDIR)/RPMS $(RPM_TOPDIR)/SRPMS $(RPM_TOPDIR)/BUILD $(RPM_TOPDIR)/BUILDROOT
	./packaging/build-rpm.sh $(RPM_TOPDIR)

rpm-test:
	./packaging/deps.sh install rpm
	$(MAKE) --no-print-directory rpm
	TARGET_DIR=$(TARGET_DIR) ./packaging/rpm-test.sh

rpm-clean:
	rm -rf $(RPM_TOPDIR) $(TARGET_DIR)/rpm-test
