package main

import "github.com/spf13/cobra"

func (a *app) doctorCmd() *cobra.Command {
	return &cobra.Command{Use: "doctor", Short: "Check this machine", RunE: func(*cobra.Command, []string) error { return nil }}
}
