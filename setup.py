"""Packaging for mb_estimation: an ament_python ROS 2 package that is also pip-installable."""

from glob import glob

from setuptools import find_packages, setup

package_name = "mb_estimation"

setup(
    name=package_name,
    version="0.3.0",
    description=(
        "Joint parameter and state estimation for a Furuta pendulum rig with regularized "
        "time-discrete multibody dynamics"
    ),
    license="Apache-2.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", sorted(glob("launch/*.launch.py"))),
        ("share/" + package_name + "/config", sorted(glob("config/*.yaml"))),
        ("share/" + package_name + "/config/examples", sorted(glob("config/examples/*.yaml"))),
        ("share/" + package_name + "/config/ros", sorted(glob("config/ros/*.yaml"))),
        ("share/" + package_name + "/config/excitations/furuta_synthetic_demo",
         sorted(glob("config/excitations/furuta_synthetic_demo/*"))),
    ],
    python_requires=">=3.10",
    install_requires=[
        "jax>=0.4.30",
        "jaxlib>=0.4.30",
        "numpy>=1.24",
        # JAX's own requirement, but not 0.7.0, whose import takes 0.46 s against 4 ms for
        # 0.5.4 and 0.6.0 (measured): a tenth of a warm calibration, paid by every command
        "ml_dtypes>=0.5,!=0.7.0",
        "scipy>=1.10",
        "rosbags>=0.11",
        "pyyaml>=6.0",
        "matplotlib>=3.7",
        # a rig from its URDF or xacro, and calibrated.urdf (config/urdf.py, io/urdf_files.py):
        # ROS's own xacro and URDF parser (urdfdom-py), the XML edited with lxml
        "xacro>=2.0",
        "urdfdom-py>=1.2",
        "lxml>=4.9",
    ],
    extras_require={
        # yourdfpy: a second URDF reader, the calibrated URDF checked against it;
        # distributed: track --cluster on a local cluster the tests start
        "test": ["pytest>=7.4", "pytest-xdist>=3.5", "hypothesis>=6.80", "ruff>=0.5",
                 "yourdfpy>=0.0.56", "distributed>=2024.1"],
        # track --cluster: the windows on a Dask distributed cluster
        "cluster": ["distributed>=2024.1"],
        # benchmarks/perf/bench_vs_mujoco.py only: MuJoCo's system identification side by side
        "bench": ["mujoco[sysid]>=4.0"],
        # ROS 2 (Kilted) as wheels for estimator_node, exciter_node and mb-estimation
        # node/rig-sim/replay:
        # rclpy with its Fast DDS middleware (without which `import rclpy` fails) and the
        # message and service packages the node imports.
        "ros": [
            "ros-rclpy",
            "ros-rmw-fastrtps-cpp",
            "ros-builtin-interfaces",
            "ros-std-msgs",
            "ros-sensor-msgs",
            "ros-diagnostic-msgs",
            "ros-rcl-interfaces",
            "ros-std-srvs",
            "ros-lifecycle-msgs",
        ],
    },
    zip_safe=False,
    entry_points={
        "console_scripts": [
            "mb-estimation = mb_estimation.cli:main",
            "estimator_node = mb_estimation.ros.ros_node:main",
            "exciter_node = mb_estimation.ros.ros_exciter:main",
        ],
    },
)
