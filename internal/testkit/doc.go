// Package testkit groups what only tests use, so that the production
// layout of internal/ reads at a glance: testserver (a real server on a
// loopback port), testregistry (a registry on a temporary store),
// testbin (the commands built once per test binary), locktest (lock and
// elect as processes), storagetest (the contract every storage engine
// passes), kindtest (the suite every kind passes), etcdtest (real etcd
// processes), electiontest (the coordinated election scenarios both
// engines run) and deptest (the test that keeps the packages layered,
// and these out of every production package).
package testkit
