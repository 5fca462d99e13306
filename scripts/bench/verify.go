package main

func verifySubcommand(args []string) int { return 2 }
