// Command kubectl is kubectl built from the k8s.io/kubectl module at the
// version leasehold's tests pin, so the end-to-end tests drive the real
// client without depending on what is installed on the machine.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
	os.Exit(0)
}
