"""Lines of real logs that several tests read, each with its public source."""

# A point-cloud registration log, one line per epoch (`LOGGER.info('%s, %s, %s, %s, %s', epoch, train loss, val loss,
# train info, val info)` after the logger's prefix), as a user pasted it: epochs 40-52, then 89-101, 14 hours later.
# Source: https://github.com/Lilac-Lee/PointNetLK_Revisited/issues/8
POINTNETLK_EPOCHS = """INFO:PointNetLK-Revisited, 2022-03-10 18:35:12,212, epoch, 0040, 0.015912, 0.017028, 0.000875, 0.000351
INFO:PointNetLK-Revisited, 2022-03-10 18:37:41,959, epoch, 0041, 0.045666, 0.015000, 0.002034, 0.003338
INFO:PointNetLK-Revisited, 2022-03-10 18:40:17,487, epoch, 0042, 0.062232, 0.063447, 0.002472, 0.003605
INFO:PointNetLK-Revisited, 2022-03-10 18:42:56,331, epoch, 0043, 0.046416, 0.022350, 0.001514, 0.001296
INFO:PointNetLK-Revisited, 2022-03-10 18:45:34,813, epoch, 0044, 0.087938, 0.087670, 0.001750, 0.001418
INFO:PointNetLK-Revisited, 2022-03-10 18:48:19,179, epoch, 0045, 0.052378, 0.018045, 0.001702, 0.000874
INFO:PointNetLK-Revisited, 2022-03-10 18:50:52,696, epoch, 0046, 0.051639, 0.077453, 0.003012, 0.000862
INFO:PointNetLK-Revisited, 2022-03-10 18:53:27,192, epoch, 0047, 0.041800, 0.253327, 0.001751, 0.000244
INFO:PointNetLK-Revisited, 2022-03-10 18:56:07,068, epoch, 0048, 0.074570, 0.025479, 0.002340, 0.001880
INFO:PointNetLK-Revisited, 2022-03-10 18:58:53,588, epoch, 0049, 0.075841, 0.001447, 0.002117, 0.000992
INFO:PointNetLK-Revisited, 2022-03-10 19:01:23,013, epoch, 0050, 0.039845, 0.270906, 0.001372, 0.002702
INFO:PointNetLK-Revisited, 2022-03-10 19:03:59,507, epoch, 0051, 0.130819, 0.158293, 0.002643, 0.003603
INFO:PointNetLK-Revisited, 2022-03-10 19:06:31,804, epoch, 0052, 17.802472, 0.132097, 0.003683, 0.002070
INFO:PointNetLK-Revisited, 2022-03-11 09:36:30,690, epoch, 0089, 0.127450, 0.018011, 0.002422, 0.000114
INFO:PointNetLK-Revisited, 2022-03-11 09:38:58,174, epoch, 0090, 0.024315, 0.008478, 0.001742, 0.000605
INFO:PointNetLK-Revisited, 2022-03-11 09:41:33,921, epoch, 0091, 0.018989, 0.060334, 0.002259, 0.000702
INFO:PointNetLK-Revisited, 2022-03-11 09:43:58,482, epoch, 0092, 0.139491, 0.036031, 0.001820, 0.001375
INFO:PointNetLK-Revisited, 2022-03-11 09:46:35,882, epoch, 0093, 0.323010, 0.009709, 0.001690, 0.000556
INFO:PointNetLK-Revisited, 2022-03-11 09:49:12,343, epoch, 0094, 0.025194, 0.016763, 0.002293, 0.001005
INFO:PointNetLK-Revisited, 2022-03-11 09:51:41,792, epoch, 0095, 0.030998, 0.027101, 0.001826, 0.000837
INFO:PointNetLK-Revisited, 2022-03-11 09:54:23,379, epoch, 0096, 0.052520, 0.001234, 0.002821, 0.000576
INFO:PointNetLK-Revisited, 2022-03-11 09:56:57,805, epoch, 0097, 0.051577, 0.022784, 0.002912, 0.001697
INFO:PointNetLK-Revisited, 2022-03-11 09:59:31,789, epoch, 0098, 0.037557, 0.608210, 0.001920, 0.000635
INFO:PointNetLK-Revisited, 2022-03-11 10:01:59,400, epoch, 0099, 0.110256, 0.029206, 0.002004, 0.004488
INFO:PointNetLK-Revisited, 2022-03-11 10:04:37,261, epoch, 0100, 0.036857, 0.047710, 0.001596, 0.000937
INFO:PointNetLK-Revisited, 2022-03-11 10:07:13,210, epoch, 0101, 0.099490, 0.019117, 0.002162, 0.000831
"""
