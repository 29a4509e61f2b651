"""Recordings (rosbag2 bags, PlotJuggler CSV exports), parameter and input files, atomic writes."""
