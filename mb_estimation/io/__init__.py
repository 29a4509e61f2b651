"""Recordings from rosbag2 bags and PlotJuggler CSV exports, parameter files, atomic writes."""
