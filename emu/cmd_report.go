package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ocsemu/ocsemu/emu/report"
)

func (a *app) reportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report RUN",
		Short: "Write a self-contained HTML report of a run directory (results/<lab>/latest)",
		Long: `report reads a run directory that emu run wrote (results/<lab>/<date-time>,
or results/<lab>/latest) and writes report.html into it: the header, a
timeline of predicted and measured phases, the circuits over time, the
signed errors and the TCP cwnd and RTT of every connection. The file needs
no network: its SVG and CSS are inline. It prints the file's path.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := report.Write(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), p)
			return nil
		},
	}
}
